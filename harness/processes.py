"""What every component the harness starts needs of its process: a loopback port the kernel picks, and a stop
that ends the whole process group (a component started through `unshare`/`chroot` or a shell is a tree)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess


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
