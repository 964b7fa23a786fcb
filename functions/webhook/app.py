"""Placeholder webhook handler (replaced by the real implementation)."""

from typing import Any


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    raise NotImplementedError("webhook handler not implemented yet")
