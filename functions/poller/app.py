"""Placeholder poller handler (replaced by the real implementation)."""

from typing import Any


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    raise NotImplementedError("poller handler not implemented yet")
