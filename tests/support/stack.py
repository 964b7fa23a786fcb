"""Helpers over the local stack (``tagpin_local.stack.LocalStack``) for the integration and e2e tests."""

from __future__ import annotations

from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.ports.state import State
from tagpin_local.stack import LocalStack

from tests.support.constants import STATE_TABLE


def drain(st: LocalStack) -> None:
    """Run the consumer until the changes queue is empty."""
    while st.consume_once(wait_s=0):
        pass


def state_of(st: LocalStack) -> State:
    """The stack's state table, through the production repositories."""
    return dynamodb_state(st.client("dynamodb"), STATE_TABLE)
