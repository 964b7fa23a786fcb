"""A result row of ``bench.cost`` written by hand, for tests of its model (``estimate``): each
measured operation's calls given, everything else zero."""

from __future__ import annotations

from typing import Any

OPERATIONS = (
    "steady_poll",
    "poll_one_change",
    "consumer_one_change",
    "verification_one_change",
    "webhook_one_change",
    "steady_reconcile",
)


def measurement(**calls: int) -> dict[str, Any]:
    """One measured operation: one invocation of 10 ms, ``calls`` (e.g. ``{"sqs:SendMessage": 1}``)."""
    return {
        "invocations": {"f": 1},
        "duration_ms": [10.0],
        "aws_calls": dict(calls),
        "dynamodb_rru": 0.0,
        "dynamodb_wru": 0.0,
        "log_bytes": 0,
    }


def row(n: int = 100, **operations: dict[str, Any]) -> dict[str, Any]:
    """A size's row: ``operations`` by name (``OPERATIONS``), the others measuring nothing."""
    unknown = set(operations) - set(OPERATIONS)
    assert not unknown, unknown
    return {
        "n": n,
        **{name: operations.get(name, measurement()) for name in OPERATIONS},
        "table_bytes": {"tagpin-state": 0},
    }
