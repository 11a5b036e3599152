"""A record of every change to one kind of object for a whole run, as a Kubernetes watch delivers it.

`Recorder(control_plane, api_version, kind)` lists the kind, then watches from the list's resourceVersion in a thread of its
own until `stop()`: every ADDED, MODIFIED and DELETED event is kept in the order the API server sent it, with its
arrival time. A watch that breaks (its server-side timeout, an API server restarted under it, 410 Gone) is resumed
from the last resourceVersion seen, or listed again, the differences kept as the events they stand for (marked
`relisted`): nothing that changed while the stream was down is lost, only its exact moment. `replay()` gives the
objects as they were after each event, which is what a test asserts "at every moment" on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import watch as k8s_watch

from .controlplane import ControlPlane
from .kube import Kube

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Event:
    at: float  # time.monotonic() when it arrived
    type: str  # ADDED | MODIFIED | DELETED
    key: Key
    obj: Obj
    relisted: bool = False  # inferred from a list after the watch broke, not delivered by it


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Recorder:
    def __init__(self, cp: ControlPlane, api_version: str, kind: str, timeout_s: int = 20) -> None:
        self.kube = Kube(cp)  # its own client: the dynamic client's discovery is not shared across threads
        self.api_version, self.kind = api_version, kind
        self.timeout_s = timeout_s
        self.events: list[Event] = []
        self.errors: list[str] = []  # why the watch broke, each time it did
        self._live: dict[Key, Obj] = {}
        self.initial: dict[Key, Obj] = {}  # what the first list found
        self._version = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watcher: k8s_watch.Watch | None = None
        self._listed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{kind}", daemon=True)
        self._thread.start()
        if not self._listed.wait(60):
            self.stop()
            raise RuntimeError(f"could not list {kind} to start watching it: {self.errors[-1:] or 'no answer'}")

    # -- the watch -------------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._version:
                    self._relist()
                self._watch()
            except Exception as exc:  # the server restarting or gone; 410: listed again
                self.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                if "410" in str(exc) or "Expired" in str(exc) or "too old" in str(exc):
                    self._version = ""
                self._stop.wait(0.5)

    def _relist(self) -> None:
        listed = self.kube.dyn.get(self.kube.resource(self.api_version, self.kind))
        now = {key_of(o): o for o in (i.to_dict() for i in listed.items)}
        at = time.monotonic()
        with self._lock:
            first = not self._listed.is_set()
            for key, obj in now.items():
                old = self._live.get(key)
                if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                    if not first:
                        self.events.append(Event(at, "ADDED" if old is None else "MODIFIED", key, obj, relisted=True))
                    self._live[key] = obj
            for key in [k for k in self._live if k not in now]:
                self.events.append(Event(at, "DELETED", key, self._live.pop(key), relisted=True))
            if first:
                self.initial = dict(now)
            self._version = listed.metadata.resourceVersion
        self._listed.set()

    def _watch(self) -> None:
        self._watcher = k8s_watch.Watch()
        stream = self.kube.dyn.watch(self.kube.resource(self.api_version, self.kind), resource_version=self._version,
                                     timeout=self.timeout_s, watcher=self._watcher)
        for raw in stream:
            if self._stop.is_set():
                break
            kind, obj = raw["type"], raw["raw_object"]
            if kind == "ERROR":
                raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
            if kind not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            key = key_of(obj)
            with self._lock:
                self.events.append(Event(time.monotonic(), kind, key, obj))
                if kind == "DELETED":
                    self._live.pop(key, None)
                else:
                    self._live[key] = obj
                self._version = obj["metadata"].get("resourceVersion") or self._version

    def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.stop()
        self._thread.join(timeout=self.timeout_s + 10)

    # -- reading it ------------------------------------------------------------------------------------------

    def snapshot(self) -> list[Event]:
        with self._lock:
            return list(self.events)

    def replay(self) -> Iterator[tuple[Event | None, dict[Key, Obj]]]:
        """(event, the objects right after it), starting with (None, what the first list found)."""
        live = dict(self.initial)
        yield None, dict(live)
        for event in self.snapshot():
            if event.type == "DELETED":
                live.pop(event.key, None)
            else:
                live[event.key] = event.obj
            yield event, dict(live)
