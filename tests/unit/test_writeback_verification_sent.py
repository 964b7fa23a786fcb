"""A write-back that stops between recording a target ``applied`` (its commit pushed) and sending
its verification (a Lambda timeout, SQS unreachable) loses no verification: the write request is
delivered again and its retry sends it, so the rollout is verified once the GitOps tool applies the
commit. The real ``Writer``, its state on moto, an in-memory Git host."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin.domain.config import RolloutSettings, WriteBackFile
from tagpin.domain.gitops.writes import FileWrite, WriteKind, WriteRequest
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.ports.git import Author
from tagpin.ports.state import State, TargetStatus
from tagpin.usecases.writeback import Writer

from tests.support.clock import FakeClock
from tests.support.git import FakeGitRepositories
from tests.support.queues import FirstSendFails, Unreachable

URL = "https://git.example.com/org/apps.git"
IMAGE = "registry.example.com/team/web:1.4"
WEB = "registry.example.com/team/web"
TARGET = "prod/shop/Deployment/k/app"
FILE = WriteBackFile(path="k/kustomization.yaml", kind="kustomize")
OLD, NEW = "sha256:" + "0" * 64, "sha256:" + "1" * 64


def test_a_verification_not_sent_is_sent_when_the_write_request_comes_back(store: State) -> None:
    git = FakeGitRepositories()
    git.create(URL, {FILE.path: f"images:\n  - name: {WEB}\n    newTag: '1.4'\n    digest: {OLD}\n"})
    clock = FakeClock(1_800_000_000_000, step=1_000)
    queue = FirstSendFails()
    move = Move(image=IMAGE, digest=NEW, observed_at=1, trigger=Trigger.POLL)
    assert store.targets.claim(TARGET, IMAGE, NEW, 1, Trigger.POLL, clock())  # as the consumer does
    request = WriteRequest(
        kind=WriteKind.PIN,
        repository=URL,
        branch="main",
        move=move,
        reference=f"{IMAGE}@{NEW}",
        files=(FileWrite(file=FILE, targets=(TARGET,)),),
        previous={TARGET: f"{IMAGE}@{OLD}"},
    )

    def writer() -> Writer:  # a fresh process each delivery
        kwargs: dict[str, Any] = {"attempts": 3, "backoff_s": 0, "sleep": lambda _s: None}
        return Writer(
            repos=git,
            state=store,
            verifications=queue,
            settings=RolloutSettings,
            author=Author,
            clock=clock,
            **kwargs,
        )

    with pytest.raises(Unreachable):  # the invocation fails: the request is not deleted
        writer().write([request])
    st = store.targets.get(TARGET)
    assert st is not None and (st.status, st.digest) == (TargetStatus.APPLIED, NEW)
    assert queue.sent == []

    clock.now += 60_000  # the message's visibility timeout: delivered again
    writer().write([request])
    assert [(v.target_id, v.move.digest) for v, _ in queue.sent] == [(TARGET, NEW)]
