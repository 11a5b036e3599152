"""The loop every stand-in of the harness runs: a daemon thread doing one round every `interval` seconds until stop()."""

from __future__ import annotations

import threading


class Poller:
    """A stand-in's thread: `round()` every `interval` seconds from `start_polling()` until `stop()`. A round that raises
    (the API server restarting or stopping under it, a CRD not there yet) is tried again the next round."""

    interval: float

    def start_polling(self, name: str) -> None:
        """Start the thread; called last in a subclass's __init__, once `round` has what it reads."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def round(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.round()
            except Exception:  # try again next round
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
