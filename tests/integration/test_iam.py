"""IAM proven from what the code calls (tests/support/iam.py): the real handlers on the local stack,
driven through every kind of call their roles in template.yaml must cover, each call recorded and
evaluated against its function's role; then every action x resource of every statement of every
role must have been used by a call.

The world (tests/support/iamworld.py), once per secret store: every kind of cluster, registry,
secret and key. What Lambda itself does with each role (polling the SQS sources, the OnFailure
destination, the logs) is added from the template (``platform_calls``).

The session-wide check (tests/support/iamsession.py) evaluates every other test's calls with the
default parameters (the SecretStore their TAGPIN_SECRET_STORE names); the calls here are captured
apart, for the parameters set here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin import wiring
from tagpin.adapters.lambda_parts import part_event
from tagpin.domain.channels import FollowedKey
from tagpin.domain.poll_pass import PollPass
from tagpin.domain.shards import PollPart
from tagpin.ports.state import TargetStatus
from tagpin_local.cosign import sign_image
from tagpin_local.http_adapter import WEBHOOK_ROUTE
from tagpin_local.lambda_runtime import http_api_event
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

from tests.conftest import require_binary
from tests.support.console import csrf_of, request, session_cookie
from tests.support.iam import Call
from tests.support.iamplatform import platform_calls
from tests.support.iamroles import denied, unused
from tests.support.iamsession import RECORDER
from tests.support.iamworld import PARTS, World, build_world
from tests.support.stack import notifications_checked, state_of
from tests.support.trail import start_promotion
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

FUNCTIONS = ("poller", "webhook", "consumer", "reconciler", "console")


@pytest.fixture(scope="module", params=["ssm", "secretsmanager"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with build_world(request.param) as built:
        yield built


def notify(w: World, kind: str, digest: str, delivery: str) -> dict[str, Any]:
    """A push notification for ``kind``'s image, through the webhook handler."""
    body = json.dumps({"image": w.images[kind], "digest": digest, "id": delivery}).encode()
    headers = {"authorization": f"Bearer {w.st.webhook_token}", "content-type": "application/json"}
    event = http_api_event("POST", "/webhooks/generic", "", headers, body, "127.0.0.1", WEBHOOK_ROUTE)
    response: dict[str, Any] = w.st.functions["webhook"].invoke(event)
    assert response["statusCode"] == 202, response
    notifications_checked(w.st)  # queued, then checked by the webhook again (its SQS event source)
    return response


def run_everything(w: World) -> None:
    """Each function through the calls its role must cover."""
    st = w.st
    digests = {
        kind: push_image(w.registries.get(kind, w.registries["secret"]).url, f"demo/{kind}", "stable")
        for kind in w.images
    }
    # signed: the consumer reads each signature (a manifest and its layer) at each kind of registry
    for kind in ("secret", "ecr", "ecr-cross", "late"):
        registry = w.registries.get(kind, w.registries["secret"])
        sign_image(registry.url, f"demo/{kind}", digests[kind], w.signer)
    for version in ("1.0.0", "1.1.0"):  # the version channel's tags (ECR)
        push_image(w.registries["ecr"].url, "demo/versioned", version)
    # webhook: notifications re-resolved at the registries (credentials in a secret; ECR: this
    # account's, another's through a registry role), each a change it enqueues; a delivery again
    # (deduplicated); an ECR event
    notify(w, "late", digests["late"], "d-0")
    notify(w, "ecr", digests["ecr"], "d-1")
    notify(w, "ecr", digests["ecr"], "d-1")
    notify(w, "ecr-cross", digests["ecr-cross"], "d-2")
    ecr_event = {
        "version": "0", "id": "e-1", "detail-type": "ECR Image Action", "source": "aws.ecr",
        "account": "123456789012", "time": "2025-11-21T05:20:00Z", "region": "us-east-1", "resources": [],
        "detail": {"result": "SUCCESS", "repository-name": "demo/web", "image-digest": digests["secret"],
                   "action-type": "PUSH", "image-tag": "stable"},
    }  # fmt: skip
    st.functions["webhook"].invoke(ecr_event)
    # poller: every registry kind (a secret, an ECR token, an ECR token through a registry role)
    st.run_poller()
    # a poll split in parts (PollParts): the scheduled invocation starts them (asynchronous
    # invocations of the poller itself), then each runs as Lambda runs it
    split_poll(st)
    # consumer: the first wave (kubeconfig clusters; one refuses connections), verified,
    # promoted to the second (EKS: this account's, and another account's through a cluster role)
    targets = [
        f"{c}/default/Deployment/{kind}/app"
        for kind in ("secret", "ecr", "ecr-cross")
        for c in ("eks", "cross")
    ]
    targets.append("eks/default/Deployment/late/app")

    def step() -> None:  # changes and verifications, one queue (a verification early: hidden till due)
        while st.consume_once(wait_s=0):
            pass

    def verified() -> bool:
        state = state_of(st)
        return all(
            (t := state.targets.get(target)) is not None and t.status is TargetStatus.VERIFIED
            for target in targets
        )

    wait_for("every image verified in the second wave", verified, step=step, every_s=0.2)
    # poller again: every tag unchanged with its targets settled, so their digests are settled
    # (a transaction checked against each tag's item); then a steady poll reads only those
    st.run_poller()
    st.run_poller()
    # a run after one that stopped for its time budget (its cursor left at a tag, written here as
    # that run did): the poll starts there, reaches every tag and moves the cursor back, the
    # poller's one write of it (a steady poll writes none)
    state_of(st).cursor.put(PollPass(FollowedKey(w.images["secret"]), 0), 0)
    st.run_poller()
    # a record that is neither a change nor a verification: the consumer fails it and makes it
    # visible again at once (its redelivery schedule), then it is left to the dead-letter queue
    st.client("sqs").send_message(
        QueueUrl=st.queue_url,
        MessageBody="not a message",
        MessageGroupId="junk",
        MessageDeduplicationId="junk",
    )
    assert st.consume_once(wait_s=1) >= 1
    # reconciler: every cluster and registry; a workload found by label, then gone (its target
    # removed); a workload a person put back by hand after tagpin's patch: held and announced (the
    # rollout notifications: SNS and the webhooks in their secret)
    st.kubes["local"].patch(
        "Deployment",
        "default",
        "secret",
        {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": f"{w.images['secret']}@sha256:{'0' * 64}"}
        ]}}}},
    )  # fmt: skip
    st.run_reconciler()
    w.kubes["cross"].delete("Deployment", "default", "found")
    st.run_reconciler()
    # a notification older than what is recorded (a later poll already saw the tag): not recorded
    stored = {"pk": {"S": f"TAG#{w.images['ecr']}"}, "sk": {"S": "STATE"}}
    later = str(int(time.time() * 1000) + 3_600_000)
    st.client("dynamodb").update_item(
        TableName="tagpin-state", Key=stored, UpdateExpression="SET observed_at = :t",
        ExpressionAttributeValues={":t": {"N": later}},
    )  # fmt: skip
    notify(w, "ecr", digests["ecr"], "d-3")
    check_that_fails(w)
    console(w)


def check_that_fails(w: World) -> None:
    """A notification whose check fails (its registry refuses connections): the webhook reports the
    record failed and brings it back on its redelivery schedule (ChangeMessageVisibility); once the
    registry is back (and the containers new: no breaker left open), it is checked."""
    st, registry, image = w.st, w.registries["ecr-cross"], w.images["ecr-cross"]
    registry._terminate()
    try:
        body = json.dumps({"image": image, "id": "d-4"}).encode()
        headers = {"authorization": f"Bearer {st.webhook_token}", "content-type": "application/json"}
        event = http_api_event("POST", "/webhooks/generic", "", headers, body, "127.0.0.1", WEBHOOK_ROUTE)
        assert st.functions["webhook"].invoke(event)["statusCode"] == 202
        wait_for(
            "the failed check recorded",
            lambda: (tag := state_of(st).tags.get(image)) is not None and tag.last_error is not None,
        )
        # a poll meanwhile: the tag's settled digest is dropped (a consistent read of its shard's
        # item, then its tombstone), under the poller's role
        assert image in state_of(st).digests.all()
        st.run_poller()
        assert image not in state_of(st).digests.all()
    finally:
        registry.reconfigure(None)
    wiring.reset()
    for function in st.functions.values():
        function.reset()
    notifications_checked(st)


def split_poll(st: LocalStack) -> None:
    import os

    saved = os.environ.get("TAGPIN_POLL_PARTS")
    os.environ["TAGPIN_POLL_PARTS"] = str(PARTS)
    try:
        assert st.run_poller() == {"parts": PARTS}
        for index in range(PARTS):
            done = st.functions["poller"].invoke(part_event(PollPart(index, PARTS)))
            assert done["part"] == f"{index}of{PARTS}", done
    finally:
        if saved is None:
            os.environ.pop("TAGPIN_POLL_PARTS", None)
        else:
            os.environ["TAGPIN_POLL_PARTS"] = saved


def console(w: World) -> None:
    """The console: signed in, every page, a hold and a release (its healing change), the dead
    letters looked at and redriven (a change sent back, a failed run's record removed)."""
    st = w.st
    sqs = st.client("sqs")  # the test's own calls, not the function's: dead letters to look at
    change = {"image": w.images["secret"], "digest": "sha256:" + "1" * 64, "observed_at": 1, "changed_at": 1}
    sqs.send_message(
        QueueUrl=st.dlq_url, MessageBody=json.dumps(change), MessageGroupId="g", MessageDeduplicationId="c"
    )
    invoke = st.functions["console"].invoke
    cookie = session_cookie(invoke(request("POST", "/console/signin", form={"token": st.console_token})))
    assert cookie is not None
    target = "local/default/Deployment/secret/app"
    pages = [("/console", {}), ("/console/images", {}), ("/console/targets", {}), ("/console/holds", {}),
             ("/console/image", {"ref": w.images["secret"]}), ("/console/target", {"id": target}),
             ("/console/dead-letters", {})]  # fmt: skip
    for path, query in pages:
        assert invoke(request("GET", path, query, cookie=cookie))["statusCode"] == 200, path
    unknown = {"id": "local/default/Deployment/nowhere/app"}  # looked up by its id: the index ByTarget
    assert invoke(request("GET", "/console/target", unknown, cookie=cookie))["statusCode"] == 404
    csrf = csrf_of(invoke(request("GET", "/console/targets", cookie=cookie))["body"])
    form = {"target": target, "image": w.images["secret"], "csrf": csrf}
    for name in ("hold", "release"):
        done = invoke(request("POST", f"/console/actions/{name}", form=form, cookie=cookie))
        assert done["statusCode"] == 303, done
    done = invoke(request("POST", "/console/actions/redrive", form={"csrf": csrf}, cookie=cookie))
    assert "n=1" in done["headers"]["Location"], done
    # a wave waiting for a person (set here): rejected through the console, the decision announced
    # (SNS, and the webhooks of the notification secret); a Slack click refused unsigned (the
    # notification secret has no slack_signing_secret)
    state, now, waiting = state_of(st), int(time.time() * 1000), "sha256:" + "2" * 64
    assert start_promotion(state, w.images["lost"], waiting, now)
    assert state.promotions.request_approval(w.images["lost"], waiting, 0, now, now + 3_600_000)
    form = {"image": w.images["lost"], "digest": waiting, "csrf": csrf}
    done = invoke(request("POST", "/console/actions/reject", form=form, cookie=cookie))
    assert "notice=rejected" in done["headers"]["Location"], done
    slack = request("POST", "/slack/actions", form={"payload": "{}"})
    assert invoke(slack)["statusCode"] == 401
    # signing out ends the session on the server (its record in the state table)
    done = invoke(request("POST", "/console/signout", form={"csrf": csrf}, cookie=cookie))
    assert done["statusCode"] == 303
    assert invoke(request("GET", "/console", cookie=cookie))["statusCode"] == 401


@pytest.fixture(scope="module")
def calls(world: World) -> list[Call]:
    with RECORDER.capture() as sink:
        run_everything(world)
    assert not sink.unattributed, f"production calls made outside any invocation: {sink.unattributed}"
    environment = {name: value for name, value in sink.calls[0].environment} if sink.calls else {}
    platform = [c for fn in FUNCTIONS for c in platform_calls(fn, environment, world.parameters)]
    return sink.calls + platform


def test_every_call_is_allowed_by_its_functions_role(world: World, calls: list[Call]) -> None:
    assert {c.function for c in calls} == set(FUNCTIONS)
    assert denied(calls, world.parameters) == []


def test_every_statement_is_used_by_a_call(world: World, calls: list[Call]) -> None:
    assert unused(calls, FUNCTIONS, world.parameters) == []
