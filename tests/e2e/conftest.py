from __future__ import annotations

from collections.abc import Iterator

import pytest
from tagpin_local.kubesim import deployment
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """The local stack with notifications, polling and the SQS loop off: each test drives every
    step itself. A Deployment default/web runs <registry>/demo/web:stable."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=False, poll_interval=None, consume=False)) as st:
        assert st.registry is not None
        st.kube.create(deployment("web", "default", f"{st.registry.host}/demo/web:stable", container="web"))
        yield st
