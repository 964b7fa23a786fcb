"""``rollout``: verification, rollback, waves, maintenance windows, dry run, notifications."""

from __future__ import annotations

from datetime import time
from enum import StrEnum
from typing import Annotated, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from tagpin.domain.config.base import LABEL_PATTERN, NotificationSecretName
from tagpin.domain.config.signatures import SignaturesField
from tagpin.domain.model import Strict


class Wave(Strict):
    """A stage of a promotion: the targets in these clusters (optionally only these namespaces)."""

    name: str = Field(pattern=LABEL_PATTERN, max_length=63, description="Shown in history and notifications.")
    clusters: list[str] = Field(min_length=1, description="Clusters of this wave (names under `clusters`).")
    namespaces: list[Annotated[str, Field(pattern=LABEL_PATTERN, max_length=63)]] = Field(
        default_factory=list,
        description="Only targets in these namespaces belong to this wave; empty: every namespace.",
    )
    soak_seconds: int | None = Field(
        default=None,
        ge=0,
        le=7 * 86400,
        description="Time to wait after every target of this wave is verified before the next wave "
        "starts; default `rollout.soak_seconds`.",
    )
    approval: bool = Field(
        default=False,
        description="A person approves each digest before this wave starts (docs/approvals.md): the "
        "promotion waits (`awaiting_approval`) until approved, rejected, or the request lapses.",
    )
    signatures: SignaturesField = Field(
        default=None,
        description="The signature gate of this wave's targets (docs/trust.md), for images that "
        "set none of their own (`images[].signatures`): `off`, `warn`, `require`, or its fields.",
    )

    def matches(self, cluster: str, namespace: str) -> bool:
        return cluster in self.clusters and (not self.namespaces or namespace in self.namespaces)


class Weekday(StrEnum):
    MON = "mon"
    TUE = "tue"
    WED = "wed"
    THU = "thu"
    FRI = "fri"
    SAT = "sat"
    SUN = "sun"


class MaintenanceWindow(Strict):
    """When rollouts may START on the targets it covers (verification and rollback always run).

    A target covered by one or more windows starts a rollout only inside one of them; a rollout
    that arrives outside is deferred (recorded ``pending``) and started when a window opens. A
    window whose ``end`` is before its ``start`` runs over midnight.
    """

    clusters: list[str] = Field(
        default_factory=list, description="Clusters it covers; empty: every cluster (see `targets`)."
    )
    targets: list[str] = Field(
        default_factory=list,
        description="Target ids it covers (`cluster/namespace/Kind/name/container`, shell patterns "
        "allowed, e.g. `prod/shop/*`); empty: every target of `clusters`.",
    )
    days: list[Weekday] = Field(
        default_factory=lambda: list(Weekday), description="Days on which the window opens."
    )
    start: time = Field(description="Opening time, `HH:MM` or `HH:MM:SS`, in `timezone`.")
    end: time = Field(description="Closing time; before `start` means the next day.")
    timezone: str = Field(default="UTC", description="IANA time zone name, e.g. `Europe/Paris`.")

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}") from None
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if self.start == self.end:
            raise ValueError("start and end are equal: the window would never open")
        return self


class NotificationSettings(Strict):
    """Where rollout events go: the stack's SNS topic, and optionally chat and HTTP webhooks."""

    sns: bool = Field(default=True, description="Publish to the stack's SNS topic (`RolloutTopic`).")
    webhooks_secret: NotificationSecretName | None = Field(
        default=None,
        description="Secret named `tagpin/notifications/...` (the SSM SecureString "
        "`/tagpin/notifications/...`, or the Secrets Manager secret) with webhook URLs: JSON "
        '`{"slack": "https://hooks.slack.com/...", "teams": "https://...", "http": "https://..."}`, '
        "each optional.",
    )


class RolloutSettings(Strict):
    """How a new digest rolls out: verification, rollback, waves and guards."""

    verify: bool = Field(
        default=True,
        description="Follow every patch until the workload has rolled out (or failed) before "
        "calling the target verified.",
    )
    verify_interval_seconds: int = Field(
        default=20, ge=1, le=900, description="Delay between two checks of a rollout in progress."
    )
    verify_timeout_seconds: int = Field(
        default=900,
        ge=1,
        le=86400,
        description="A rollout not complete this long after the patch has failed (besides "
        "`ProgressDeadlineExceeded` or an Argo Rollout's `Degraded`, which fail it at once). The "
        "time an Argo Rollout spends paused at a step does not count: it counts again from the "
        "end of the pause.",
    )
    max_pause_seconds: int = Field(
        default=7 * 86400,
        ge=1,
        le=30 * 86400,
        description="An Argo Rollout held at a pause (a canary step, a blue-green promotion, a "
        "person's `kubectl argo rollouts pause`) longer than this is recorded `stalled` and no "
        "longer followed, with one notification: not failed, not rolled back, the digest not marked "
        "bad. While it is paused tagpin looks again every `verify_interval_seconds` for as long as "
        "`verify_timeout_seconds`, then less and less often (each wait about doubles, up to 15 "
        "minutes).",
    )
    rollback: bool = Field(
        default=True,
        description="On failure, restore the previous image of every target of that digest; either "
        "way the digest is marked bad for the tag until the tag moves to another digest.",
    )
    waves: list[Wave] = Field(
        default_factory=list,
        description="Ordered waves. A new digest goes to the first; the next starts once every "
        "target of the previous one is verified and its soak time has passed. Targets in no wave "
        "form an implicit last wave. Empty: one wave with every target.",
    )
    soak_seconds: int = Field(
        default=0, ge=0, le=7 * 86400, description="Default soak time after a verified wave."
    )
    maintenance_windows: list[MaintenanceWindow] = Field(
        default_factory=list, description="When rollouts may start, per cluster or target."
    )
    max_concurrent_per_cluster: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="Rollouts (patched, not yet verified) at a time in one cluster, over every "
        "image; more are deferred. Unset: no limit.",
    )
    dry_run: bool = Field(
        default=False,
        description="Record the plan (what would be patched, in which wave) and patch nothing.",
    )
    history_retention_days: int = Field(
        default=90, ge=1, le=3650, description="Audit history items expire (DynamoDB TTL) after this."
    )
    approval_expires_seconds: int = Field(
        default=86400,
        ge=10,
        le=30 * 86400,
        description="An approval request not answered within this lapses (recorded; nothing rolls).",
    )
    notifications: NotificationSettings = Field(
        default_factory=NotificationSettings, description="Notifications on rollout events."
    )

    def soak_after(self, wave: Wave | None) -> int:
        return self.soak_seconds if wave is None or wave.soak_seconds is None else wave.soak_seconds
