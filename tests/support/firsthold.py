"""A check's claim and its first registry request, watched from a test: the second receive of a
queued notification runs while the first check holds the delivery's claim and waits for its
registry (``tests/unit/test_webhook_redelivered.py``, ``test_webhook_received_twice.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class HeldFirst:
    """``claim`` and ``resolve`` wrapped: ``claimed`` is set once a claim was written, ``asked``
    once the first registry request was made; that first request answers only after ``release``
    (or ``timeout_s``), then raises ``first_raises`` when given, else answers as ``resolve`` does.
    The claim and the request run on workers of their own, side by side: a claim written says
    nothing of the request, so a test waits for both (``wait``)."""

    def __init__(
        self,
        claim: Callable[..., bool],
        resolve: Callable[..., Any],
        *,
        timeout_s: float,
        first_raises: Exception | None = None,
    ) -> None:
        self._claim, self._resolve, self._timeout_s, self._raises = claim, resolve, timeout_s, first_raises
        self.claimed, self.asked, self._go = threading.Event(), threading.Event(), threading.Event()
        self._lock = threading.Lock()
        self.requests = 0

    def claim(self, *args: Any) -> bool:
        taken = self._claim(*args)
        self.claimed.set()
        return taken

    def resolve(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.requests += 1
            first = self.requests == 1
        if first:
            self.asked.set()
            self._go.wait(self._timeout_s)
            if self._raises is not None:
                raise self._raises
        return self._resolve(*args, **kwargs)

    def wait(self) -> None:
        """Until the first check's claim is written and its registry asked."""
        assert self.claimed.wait(self._timeout_s), "no claim written"
        assert self.asked.wait(self._timeout_s), "the registry was not asked"

    def release(self) -> None:
        self._go.set()
