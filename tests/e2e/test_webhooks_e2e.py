"""End to end over HTTP: the real registry's notifications reach the webhook and roll a
Deployment; a forged notification (valid token, fake digest) and an unauthenticated one change
nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from tagpin_local.demo import current_image, wait_for_digest
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

from tests.support.stack import notifications_checked, notify, state_of, webhook_stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def live() -> Iterator[LocalStack]:
    """Notifications on (the registry posts to the webhook), the SQS loop on, no poller."""
    with webhook_stack(notifications=True) as st:
        yield st


def forged(stack: LocalStack, digest: str, token: str) -> httpx.Response:
    return notify(stack, digest, f"forged-{digest[-8:]}-{token[-4:]}", token=token)


def test_real_notification_rolls_and_forged_ones_change_nothing(live: LocalStack) -> None:
    assert live.registry is not None
    digest = push_image(live.registry.url, "demo/web", "stable")
    image, annotations, _ = wait_for_digest(live, digest, time.monotonic())
    assert image.endswith(f"/demo/web:stable@{digest}")
    assert annotations["tagpin.dev/trigger"] == "webhook"  # no poller runs here: the notification did it
    patches = live.kube.count("PATCH", r"/deployments/web$")  # sent, not only applied: none is

    fake = "sha256:" + "f" * 64
    recorded = state_of(live).tags.get(f"{live.registry.host}/demo/web:stable")
    answer = forged(live, fake, live.webhook_token)
    assert answer.status_code == 202 and answer.json() == {"queued": 1}  # answered, checked after
    notifications_checked(live)
    # the registry does not serve the fake digest: the record is the registry's, nothing enqueued
    # (the target already runs it)
    after = state_of(live).tags.get(f"{live.registry.host}/demo/web:stable")
    assert recorded is not None and after is not None and after.digest == recorded.digest == digest

    refused = forged(live, fake, "not-the-token")
    assert refused.status_code == 401

    time.sleep(1.0)  # give the SQS loop the chance to do something wrong
    assert current_image(live)[0].endswith("@" + digest)
    assert live.kube.count("PATCH", r"/deployments/web$") == patches
    assert live.consumer_errors == [] and live.webhook_errors == []
