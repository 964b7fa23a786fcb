from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.ports.state import State
from tagpin_local.moto_process import MotoProcess

from tests.support.aws import create_table
from tests.support.constants import REGION


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch) -> Iterator[State]:
    """A state table in moto, in process, for tests whose real component is the registry."""
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        db = boto3.client("dynamodb", region_name=REGION)
        create_table(db, "state", ("pk", "sk"))
        yield dynamodb_state(db, "state")


@pytest.fixture(scope="module")
def moto_process() -> Iterator[MotoProcess]:
    """moto's server in a process of its own, as a local stack with ``processes`` runs it."""
    server = MotoProcess()
    server.start()
    try:
        yield server
    finally:
        server.stop()
