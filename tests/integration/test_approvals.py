"""Approvals end to end: the real handlers on the local stack (the SQS loop running), waves stage
then prod, prod needing a person's approval. Approve (a double click approves once), a stale
digest's approval does nothing and says so, reject (the digest marked bad, prod untouched), and a
request nobody answers lapses."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin.ports.state import PromotionStatus, TargetStatus
from tagpin_cli import commands
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import state_of
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

STAGE, PROD = "stage/app/Deployment/app/app", "prod/app/Deployment/app/app"
ROLLOUT: dict[str, Any] = {
    "verify_interval_seconds": 1,
    "soak_seconds": 0,
    "approval_expires_seconds": 600,
    "waves": [
        {"name": "stage", "clusters": ["stage"]},
        {"name": "prod", "clusters": ["prod"], "approval": True},
    ],
}


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=False,
        poll_interval=None,
        consume=True,
        clusters=["stage", "prod"],
        rollout=ROLLOUT,
        rollout_delay=0.2,
    )
    with LocalStack(options) as stack:
        assert stack.registry is not None
        image = f"{stack.registry.host}/demo/app:stable"
        targets = []
        for cluster in ("stage", "prod"):
            stack.kubes[cluster].create(deployment("app", "app", image, container="app"))
            targets.append({"cluster": cluster, "namespace": "app", "name": "app", "container": "app"})
        stack.options.images = [{"image": image, "targets": targets}]
        stack.write_config()
        yield stack


def image(st: LocalStack) -> str:
    assert st.registry is not None
    return f"{st.registry.host}/demo/app:stable"


def push(st: LocalStack) -> str:
    assert st.registry is not None
    digest = push_image(st.registry.url, "demo/app", "stable")
    st.run_poller()
    return digest


def awaiting(st: LocalStack, digest: str) -> bool:
    promotion = state_of(st).promotions.get(image(st))
    return promotion is not None and promotion.digest == digest and promotion.awaiting_approval


def status(st: LocalStack, target: str, digest: str) -> TargetStatus | None:
    found = state_of(st).targets.get(target)
    return found.status if found is not None and found.digest == digest else None


def prod_condition(st: LocalStack) -> str:
    (row,) = [r for r in commands.status() if r["image"] == image(st)]
    return next(t["condition"] for t in row["targets"] if t["target"] == PROD)


def test_approve_reject_stale_and_double_click(st: LocalStack) -> None:
    first = push(st)
    wait_for("prod waits for approval", lambda: awaiting(st, first))
    assert status(st, STAGE, first) is TargetStatus.VERIFIED and status(st, PROD, first) is None
    assert prod_condition(st) == "awaiting-approval"
    assert ("awaiting_approval", "prod") in [(n["event"], n["wave"]) for n in st.notifications()]

    # a double click: approved once
    assert commands.decide(PROD, True)["decision"] == "approved"
    assert commands.decide(PROD, True)["decision"] in ("already-decided", "nothing-waiting")
    wait_for("prod verified", lambda: status(st, PROD, first) is TargetStatus.VERIFIED)
    trail = [e for e in state_of(st).history.of_image(image(st)) if e.digest == first]
    decided = [e for e in trail if e.event == "approved"]
    assert len(decided) == 1 and "via cli" in (decided[0].detail or "")

    second = push(st)
    wait_for("the second digest waits", lambda: awaiting(st, second))
    stale = commands.decide(image(st), True, digest=first)  # the old digest's approval
    assert stale["decision"] == "stale" and "supersedes" in stale["detail"]
    assert awaiting(st, second)  # nothing changed

    rejected = commands.decide(image(st), False)
    assert rejected["decision"] == "rejected"
    tag = state_of(st).tags.get(image(st))
    assert tag is not None and tag.blocked  # marked bad, as a rollback does
    promotion = state_of(st).promotions.get(image(st))
    assert promotion is not None and promotion.status is PromotionStatus.HALTED
    st.run_poller()
    st.run_reconciler()
    time.sleep(2)
    assert status(st, PROD, first) is TargetStatus.VERIFIED  # prod untouched


def test_a_request_nobody_answers_lapses(st: LocalStack) -> None:
    st.options.rollout = {**ROLLOUT, "approval_expires_seconds": 10}
    st.write_config()
    try:
        digest = push(st)
        wait_for("waiting", lambda: awaiting(st, digest))
        promotion = wait_for(
            "lapsed",
            lambda: (
                (p := state_of(st).promotions.get(image(st))) is not None
                and p.status is PromotionStatus.HALTED
                and p
            ),
            deadline_s=40,
        )
        assert "lapsed" in (promotion.detail or "")
        assert commands.decide(image(st), True)["decision"] == "nothing-waiting"
        assert status(st, PROD, digest) is None
        events = [e.event for e in state_of(st).history.of_image(image(st)) if e.digest == digest]
        assert "lapsed" in events
    finally:
        st.options.rollout = ROLLOUT
        st.write_config()
