"""Waiting on a live cluster: one poll loop for the real-component tests, whose failure says what never came."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 60, log: Callable[[], str] | None = None,
             interval: float = 0.1) -> Any:
    """`probe()`'s first truthy value; after `timeout` seconds an AssertionError naming `what`, with the last 30
    lines of `log()` where a component's log tells why."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = "\n".join(log().splitlines()[-30:]) if log else ""
            raise AssertionError(f"{what}: not after {timeout:.0f} s" + (f"\n{tail}" if tail else ""))
        time.sleep(interval)
