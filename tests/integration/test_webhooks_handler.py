"""Every sample in events/webhooks through the real webhook handler of the local stack.

The samples name the registry 127.0.0.1:5000 and the key local-dev-webhook-token; here the host
becomes the stack's registry (where demo/web:stable was really pushed) and, where the body is not
signed, the samples' digest becomes the pushed one. Registries that cannot be reached from here
(docker.io, ghcr.io, Artifact Registry, ECR) are not followed: their events are acknowledged as
ignored, with the image the payload normalises to. An HTTP delivery is answered once queued (the
count of its events); the stack's event source then runs the handler's queued stage, whose
outcome is read in the state table.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tagpin import wiring
from tagpin_local.oci import push_image
from tagpin_local.stack import WEBHOOK_SECRET, LocalStack

from tests.support.stack import notifications_checked, state_of
from tests.support.webhooks import SAMPLE_DIGEST, SAMPLE_NAMES, SAMPLES

pytestmark = pytest.mark.integration
SIGNED = ("github-package", "github-registry-package", "nexus", "artifactory-legacy-signed")


@pytest.fixture(scope="module")
def pushed(stack: LocalStack) -> str:
    assert stack.registry is not None
    digest = push_image(stack.registry.url, "demo/web", "stable")
    text = (SAMPLES / "secret.json").read_text().replace("127.0.0.1:5000", stack.registry.host)
    secret = json.loads(text)
    secret["distribution"] = {"token": stack.webhook_token}
    stack.put_secret(WEBHOOK_SECRET, json.dumps(secret))
    wiring.reset()  # the function's cached secret and config: a new container, in effect
    return digest


def load(name: str, stack: LocalStack, digest: str) -> tuple[dict[str, Any], dict[str, Any]]:
    assert stack.registry is not None
    texts = [(SAMPLES / f"{name}{suffix}").read_text() for suffix in (".json", ".expected.json")]
    texts = [t.replace("127.0.0.1:5000", stack.registry.host) for t in texts]
    if name not in SIGNED:
        texts = [
            t.replace(SAMPLE_DIGEST.removeprefix("sha256:"), digest.removeprefix("sha256:")) for t in texts
        ]
    texts[0] = (
        texts[0].replace("local-dev-webhook-token", stack.webhook_token)
        if name.startswith("distribution")
        else texts[0]
    )
    event, expected = (json.loads(t) for t in texts)
    return event, expected


@pytest.mark.parametrize("name", [n for n in SAMPLE_NAMES if n != "ecr"])
def test_sample_through_the_real_handler(stack: LocalStack, pushed: str, name: str) -> None:
    assert stack.registry is not None
    event, expected = load(name, stack, pushed)
    response = stack.functions["webhook"].invoke(event)
    assert response["statusCode"] == 202, response
    assert json.loads(response["body"]) == {"queued": len(expected["events"])}
    notifications_checked(stack)
    assert stack.webhook_errors == []
    followed = f"{stack.registry.host}/demo/web:stable"
    images = [f"{e['registry']}/{e['repository']}:{e['tag']}" for e in expected["events"]]
    state = state_of(stack)
    if followed in images:  # the registry's answer, whatever the payload said
        recorded = state.tags.get(followed)
        assert recorded is not None and recorded.digest == pushed
    for image in images:  # the others are ignored: nothing recorded
        assert image == followed or state.tags.get(image) is None


def test_ecr_eventbridge_event_through_the_real_handler(stack: LocalStack, pushed: str) -> None:
    event = json.loads((SAMPLES / "ecr.json").read_text())
    result = stack.functions["webhook"].invoke(event)
    assert result["status"] == 202
    assert result["ignored"] == 1 and result["accepted"] == 0
    assert result["events"][0]["image"] == "123456789012.dkr.ecr.eu-west-1.amazonaws.com/demo/web:stable"


def test_ecr_over_http_is_refused(stack: LocalStack, pushed: str) -> None:
    event, _ = load("generic", stack, pushed)
    event["pathParameters"]["source"] = "ecr"
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/webhooks/ecr"
    event["body"] = (SAMPLES / "ecr.json").read_text()
    assert stack.functions["webhook"].invoke(event)["statusCode"] == 401


def test_forged_digest_is_not_trusted(stack: LocalStack, pushed: str) -> None:
    assert stack.registry is not None
    event, _ = load("generic", stack, pushed)
    fake = "sha256:" + "f" * 64
    event["body"] = json.dumps(
        {"image": f"{stack.registry.host}/demo/web:stable", "digest": fake, "id": "forged-1"}
    )
    body = json.loads(stack.functions["webhook"].invoke(event)["body"])
    assert body == {"queued": 1}
    notifications_checked(stack)
    recorded = state_of(stack).tags.get(f"{stack.registry.host}/demo/web:stable")
    assert recorded is not None and recorded.digest == pushed  # the registry's, not the payload's
