"""Rollout notifications in memory: the ``Notifier`` port (``tagpin.ports.notify``) and the SNS client
``tagpin.adapters.notify.Notifier`` publishes with."""

from __future__ import annotations

import threading
from typing import Any

from tagpin.ports.notify import Notifier, RolloutEvent


class RecordingNotifier:
    """The ``Notifier`` port (SNS and webhooks in production): ``sent`` holds the events, in order."""

    def __init__(self) -> None:
        self.sent: list[RolloutEvent] = []
        self._lock = threading.Lock()

    def send(self, event: RolloutEvent) -> None:
        with self._lock:
            self.sent.append(event)


class FakeSns:
    """A boto3 SNS client: ``published`` holds the keyword arguments of each ``publish``."""

    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []

    def publish(self, **kwargs: Any) -> None:
        self.published.append(kwargs)


_notifier: Notifier = RecordingNotifier()
