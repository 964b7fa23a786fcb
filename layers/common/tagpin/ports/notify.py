"""Rollout notifications, as the use cases see them: one event per step of a rollout, sent once.

``tagpin.adapters.notify`` sends them to SNS and, optionally, Slack, Teams and an HTTP webhook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import Digest


class RolloutEventKind(StrEnum):
    APPLIED = "applied"
    VERIFIED = "verified"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"
    STALLED = "stalled"  # a rollout paused too long: no longer followed (not rolled back)
    HELD = "held"  # a person stepped in on a target: tagpin leaves it where it is
    BLOCKED = "blocked"  # a trust gate refused the digest (unsigned, a platform missing)
    AWAITING_APPROVAL = "awaiting_approval"  # a wave waits for a person: approve or reject
    APPROVED = "approved"
    REJECTED = "rejected"


@dataclass(frozen=True)
class RolloutEvent:
    event: RolloutEventKind
    image: FollowedKey
    digest: Digest
    wave: str
    targets: list[str]
    at: int  # epoch ms
    detail: str = ""
    trigger: str | None = None
    correlation_id: str | None = None
    complete: bool = False  # verified: the last wave, the promotion is complete
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        short = self.digest.rsplit(":", 1)[-1][:12]
        what = {
            "applied": f"applied to wave {self.wave}",
            "verified": f"verified in wave {self.wave}" + (" (promotion complete)" if self.complete else ""),
            "failed": f"FAILED in wave {self.wave}",
            "rolled_back": f"FAILED in wave {self.wave} and rolled back",
            "stalled": f"STALLED in wave {self.wave}: paused too long, no longer followed (not rolled back)",
            "held": "held where a person put it (not patched back)",
            "blocked": "BLOCKED by a trust gate (not rolled)",
            "awaiting_approval": f"waits for approval before wave {self.wave}",
            "approved": f"approved for wave {self.wave}",
            "rejected": f"REJECTED for wave {self.wave} (marked bad)",
        }[self.event]
        return f"tagpin: {self.image}@{short} {what}"

    def text(self) -> str:
        lines = [self.summary(), "targets: " + ", ".join(self.targets)]
        if self.detail:
            lines.append(self.detail)
        return "\n".join(lines)


class Notifier(Protocol):
    def send(self, event: RolloutEvent) -> None: ...
