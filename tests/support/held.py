"""A consumer that stops right after its PATCH while a person's hold lands: the case
``tagpin.usecases.interrupted`` settles (used by the put-back tests against a real API server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tagpin.domain.config import Kind
from tagpin.ports.workloads import ImageChange


class Stopped(BaseException):
    """The consumer stopped (a Lambda timeout, a crash)."""


class HeldDuringThePatch:
    """tagpin's client, with a person holding the target as the PATCH lands, and the consumer
    stopping before it reads its claim again."""

    def __init__(self, workloads: Any, hold: Callable[[], None]) -> None:
        self._workloads, self._hold = workloads, hold

    def __getattr__(self, name: str) -> Any:
        return getattr(self._workloads, name)

    def set_image(self, namespace: str, kind: Kind, name: str, change: ImageChange) -> None:
        # The hold is written once the PATCH is accepted, while the claim is still open: a PATCH
        # refused (409, the Deployment's controller wrote it since the GET) is retried by the
        # consumer, which would then find the hold before its PATCH (superseded, as it must) and
        # not be the case under test (CI run W).
        self._workloads.set_image(namespace, kind, name, change)
        self._hold()
        raise Stopped("after the PATCH")
