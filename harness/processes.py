"""What every component the harness starts needs of its process: a loopback port the kernel picks, and a stop
that ends the whole process group (a component started through `unshare`/`chroot` or a shell is a tree)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_group(proc: subprocess.Popen[bytes] | None, grace: float = 10) -> None:
    """SIGTERM the process group of `proc` (started with start_new_session), SIGKILL it after `grace` seconds."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class ProcessOwner:
    """A component made of processes (`self.procs`, in start order, each logging to `workdir`/<name>.log): started
    in a session of their own, waited for with the log's tail in the error, stopped in reverse order, and a
    context manager that stops them however the block ends."""

    procs: dict[str, subprocess.Popen[bytes]]
    workdir: Path
    error: type[Exception] = RuntimeError  # what a process that did not start raises

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def log_tail(self, name: str, lines: int = 25) -> str:
        path = self.log(name)
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        with open(self.log(name), "ab") as log:
            self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                start_new_session=True, cwd=self.workdir, env=env)

    def _fail(self, name: str, what: str) -> Exception:
        return self.error(f"{name} {what} (log {self.log(name)}):\n{self.log_tail(name)}")

    def _wait(self, name: str, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.procs[name]
            if proc.poll() is not None:
                raise self._fail(name, f"exited with status {proc.returncode} while starting")
            if ready():
                return
            time.sleep(0.2)
        raise self._fail(name, f"was not ready after {timeout:.0f} s")

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            stop_group(self.procs[name])
        self.procs.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
