"""A process that dies between two DynamoDB requests: a boto3 client wrapper for the tests that a
record is not lost when its writer dies (test_target_trail, test_audit_trail)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Item = dict[str, Any]


class Crash(BaseException):
    """The process dies (not an error any handler catches)."""


class Dying:
    """A boto3 client whose process dies at the first request that puts an item ``written`` holds
    for (a PutItem's, or a Put of a TransactWriteItems): ``before`` the request reaches DynamoDB, or
    ``after`` it did (its answer lost). Every other request, and every one after the crash, goes
    through."""

    def __init__(self, client: Any, written: Callable[[Item], bool], when: str) -> None:
        self._client, self._written, self._when = client, written, when
        self.crashed = False

    def _writes(self, params: dict[str, Any]) -> bool:
        items = [params.get("Item") or {}]
        items += [w["Put"]["Item"] for w in params.get("TransactItems", []) if "Put" in w]
        return any(self._written(i) for i in items)

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if not callable(real) or self.crashed:
            return real

        def call(**params: Any) -> Any:
            if self.crashed or not self._writes(params):
                return real(**params)
            self.crashed = True
            if self._when == "after":
                real(**params)
            raise Crash(f"died {self._when} {name}")

        return call
