"""Count: every answer of the AWS endpoint that botocore may retry (HTTP 5xx, throttling), retried
or not.

``AwsCalls`` counts an API call once, whatever botocore did to get its answer: a call that moto
answered with a 500 and botocore retried with backoff shows up as one call that took long. So a
bench run that absorbed such retries would print figures (durations, and counts if a retried write
had landed) that look true and are not. This wrapper around botocore's
``Endpoint._do_get_response`` (measurement only, like ``AwsCalls``) sees every HTTP answer, counts
those with a status of 500 or more or a throttling code, by operation, and keeps the first error
message of each; the bench prints them per size and stores them in its results.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

import botocore.endpoint

THROTTLING = {
    "ThrottlingException",
    "Throttling",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
}


class ServerErrors:
    """5xx and throttling answers of the AWS endpoint in this process, by ``service:operation``."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.messages: dict[str, str] = {}
        self._lock = threading.Lock()
        self._original: Any = None

    def install(self) -> None:
        original = botocore.endpoint.Endpoint._do_get_response
        errors = self

        def answered(endpoint: Any, request: Any, operation_model: Any, context: Any) -> Any:
            result = original(endpoint, request, operation_model, context)
            success, _exception = result
            if success is not None:
                http, parsed = success
                error = (parsed or {}).get("Error") or {}
                if http.status_code >= 500 or error.get("Code") in THROTTLING:
                    name = f"{operation_model.service_model.service_name}:{operation_model.name}"
                    text = f"HTTP {http.status_code} {error.get('Code', '')}: {error.get('Message', '')}"
                    errors.record(name, text)
            return result

        self._original = original
        setattr(botocore.endpoint.Endpoint, "_do_get_response", answered)  # noqa: B010 (measurement)

    def uninstall(self) -> None:
        if self._original is not None:
            setattr(botocore.endpoint.Endpoint, "_do_get_response", self._original)  # noqa: B010
            self._original = None

    def record(self, operation: str, message: str) -> None:
        with self._lock:
            self.counts[operation] += 1
            self.messages.setdefault(operation, message[:300])

    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())

    def since(self, mark: collections.Counter[str]) -> dict[str, int]:
        """The answers counted since ``mark`` (a copy of ``counts`` taken earlier)."""
        with self._lock:
            return {k: v - mark.get(k, 0) for k, v in sorted(self.counts.items()) if v > mark.get(k, 0)}

    def mark(self) -> collections.Counter[str]:
        with self._lock:
            return collections.Counter(self.counts)

    def report(self, since: collections.Counter[str]) -> dict[str, Any]:
        counts = self.since(since)
        return {"answers": counts, "first_message": {k: self.messages[k] for k in counts}}
