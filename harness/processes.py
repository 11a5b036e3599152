"""What every component the harness starts needs of its process: a loopback port the kernel picks, and a stop
that ends the whole process group (a component started through `unshare`/`chroot` or a shell is a tree)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
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
    """A component made of processes (`self.procs`, in start order): stopped in reverse order, and a context
    manager that stops them however the block ends."""

    procs: dict[str, subprocess.Popen[bytes]]

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            stop_group(self.procs[name])
        self.procs.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
