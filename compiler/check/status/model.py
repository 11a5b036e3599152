"""What `gpuc status` finds: one line per check and subject, with the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Level = Literal["ok", "warn", "fail", "skip"]
LEVELS: tuple[Level, ...] = ("fail", "warn", "ok", "skip")


@dataclass(frozen=True)
class Finding:
    check: str  # the check's id (dra-api, device-classes, ...)
    level: Level  # skip: the state holds nothing to judge by (a kind not exported)
    message: str
    fix: str = ""
    where: str = ""  # file:line of the object in the export, or the live object

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.check, "level": self.level, "message": self.message}
        if self.fix:
            out["fix"] = self.fix
        if self.where:
            out["where"] = self.where
        return out


@dataclass
class StatusReport:
    """The running cluster against the fleet's intents for it."""

    cluster: str
    source: str  # the exports read, or the live context
    findings: list[Finding] = field(default_factory=list)

    def count(self, level: Level) -> int:
        return sum(1 for f in self.findings if f.level == level)

    @property
    def failed(self) -> bool:
        return self.count("fail") > 0

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "source": self.source, "ok": not self.failed,
                "summary": {level: self.count(level) for level in LEVELS},
                "checks": [f.as_dict() for f in self.findings]}
