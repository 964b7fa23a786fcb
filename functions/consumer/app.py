"""Placeholder consumer handler (replaced by the real implementation)."""

from typing import Any


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    raise NotImplementedError("consumer handler not implemented yet")
