from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from tagpin.state import StateStore
from tagpin_local.kubesim import deployment
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.unit.conftest import create_table


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """The local stack with notifications, polling and the SQS loop off: each test drives every
    step itself. A Deployment default/web runs <registry>/demo/web:stable."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=False, poll_interval=None, consume=False)) as st:
        assert st.registry is not None
        st.kube.create(deployment("web", "default", f"{st.registry.host}/demo/web:stable", container="web"))
        yield st


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch) -> Iterator[StateStore]:
    """A state table in moto, in process, for tests whose real component is the registry."""
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_table(db, "state", ("pk", "sk"))
        yield StateStore(db, "state")
