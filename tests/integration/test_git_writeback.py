"""The write-back use case (tagpin.usecases.writeback) against Git's own smart HTTP server (``git
http-backend`` on 127.0.0.1 with token authentication, tools/tagpin_local/gitserver.py), the Git
client tagpin ships (dulwich), the token read from a ``tagpin/git/`` secret, and the state table
(moto): each kind of file in one commit, one commit per repository per batch, no empty commit,
never backwards, a person's commit in between kept, wrong credentials and a server that is down
(a clear error, nothing written, the request written when it comes again), a request that cannot
be edited failing alone, and a revert."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from tagpin.adapters.git.credentials import GitTokens
from tagpin.adapters.git.repositories import DulwichRepositories
from tagpin.domain.config import GitHost, RolloutSettings, WriteBackFile, WriteMode
from tagpin.domain.gitops.writes import FileWrite, WriteKind, WriteOutcome, WriteRequest
from tagpin.domain.messages import Trigger, VerificationKind
from tagpin.domain.moves import Move
from tagpin.ports.git import Author
from tagpin.ports.state import ImageEvent, State, TargetStatus
from tagpin.usecases.writeback import Writer
from tagpin_local.gitserver import GitServer

from tests.support.clock import FakeClock
from tests.support.git import git_http_server
from tests.support.queues import ListVerificationQueue

WRITE, WRONG = "ghp_write_0123456789abcdef", "ghp_wrong_0123456789abcdef"
D0, D1, D2 = ("sha256:" + c * 64 for c in "012")
WEB = "registry.example.com/team/web"
IMAGE = f"{WEB}:1.4"
T_KUSTOMIZE, T_HELM, T_MANIFEST, T_MARKER = (f"prod/shop/Deployment/{n}/app" for n in ("k", "h", "m", "x"))
KUSTOMIZATION = f"""\
resources:
  - deploy.yaml   # the Deployment
images:
  - name: web
    newName: {WEB}
    newTag: "1.3"
    digest: {D0}
"""
VALUES = f"""\
# values of the web chart
image:
  repository: {WEB}
  tag: "1.4@{D0}"   # pinned by tagpin
replicas: 2
"""
MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - name: app
          image: {WEB}:1.4@{D0}
"""
MARKED = f"""\
web:
  image: {WEB}:1.4@{D0} # {{"$tagpin": "web"}}
"""
FILES = {
    "apps/web/kustomization.yaml": KUSTOMIZATION,
    "charts/web/values.yaml": VALUES,
    "apps/web/deploy.yaml": MANIFEST,
    "apps/web/marked.yaml": MARKED,
    "README.md": "apps\n",
}
SPECS = {
    T_KUSTOMIZE: WriteBackFile(path="apps/web/kustomization.yaml", kind="kustomize"),
    T_HELM: WriteBackFile(
        path="charts/web/values.yaml", kind="helm", tag="image.tag", repository="image.repository"
    ),
    T_MANIFEST: WriteBackFile(path="apps/web/deploy.yaml", kind="manifest"),
    T_MARKER: WriteBackFile(path="apps/web/marked.yaml", kind="manifest", marker="web"),
}


@pytest.fixture
def server() -> Iterator[GitServer]:
    yield from git_http_server(tokens={WRITE: "write"})


class World:
    """A Writer as the write-back function builds it, the secret store a dict."""

    def __init__(self, server: GitServer, state: State) -> None:
        self.server, self.state = server, state
        self.secrets = {"tagpin/git/local": json.dumps({"token": WRITE})}
        self.verifications = ListVerificationQueue()
        self.clock = FakeClock(1_800_000_000_000, step=1_000)
        hosts = {server.host: GitHost(credentials_secret="tagpin/git/local", insecure=True)}
        tokens = GitTokens(lambda: hosts, self.secrets.__getitem__)
        self.repos = DulwichRepositories(tokens, timeout=5, forget=tokens.forget)  # as tagpin.gitwiring
        self.slept: list[float] = []
        self.writer = Writer(
            repos=self.repos,
            state=state,
            verifications=self.verifications,
            settings=lambda: RolloutSettings(verify_interval_seconds=7),
            author=lambda: Author("tagpin", "tagpin@users.noreply.invalid"),
            clock=self.clock,
            attempts=3,
            backoff_s=0.01,
            sleep=self.slept.append,
        )

    def claim(self, targets: list[str], digest: str, observed_at: int = 1_000) -> None:
        for target in targets:
            assert self.state.targets.claim(target, IMAGE, digest, observed_at, Trigger.POLL, self.clock())

    def status(self, target: str) -> tuple[TargetStatus, str, str]:
        st = self.state.targets.get(target)
        assert st is not None
        return st.status, st.digest, st.detail or ""


@pytest.fixture
def world(server: GitServer, state: State) -> World:
    return World(server, state)


def request(
    url: str,
    targets: list[str],
    digest: str = D1,
    *,
    kind: WriteKind = WriteKind.PIN,
    observed_at: int = 1_000,
    reference: str | None = None,
    files: dict[str, WriteBackFile] | None = None,
) -> WriteRequest:
    specs = files or SPECS
    return WriteRequest(
        kind=kind,
        repository=url,
        branch="main",
        move=Move(
            image=IMAGE,
            digest=digest,
            observed_at=observed_at,
            trigger=Trigger.POLL if kind is WriteKind.PIN else Trigger.ROLLBACK,
            correlation_id="delivery-1",
        ),
        reference=reference or f"{IMAGE}@{digest}",
        reason="crash loop" if kind is WriteKind.REVERT else None,
        files=tuple(FileWrite(file=specs[t], targets=(t,)) for t in targets),
        previous={t: f"{IMAGE}@{D0}" for t in targets} if kind is WriteKind.PIN else {},
    )


def test_each_kind_of_file_is_pinned_in_one_commit_and_the_commit_is_recorded(world: World) -> None:
    url = world.server.create("org/apps", FILES)
    targets = list(SPECS)
    world.claim(targets, D1)
    (written,) = world.writer.write([request(url, targets)])
    head = world.server.head("org/apps")
    assert written.outcome is WriteOutcome.COMMITTED and written.commit == head
    assert world.server.log("org/apps") == [f"tagpin: web:1.4@{D1[:19]}", "initial commit"]
    show = lambda path: world.server.show("org/apps", path)  # noqa: E731
    assert f'newTag: "1.4"\n    digest: {D1}\n' in show("apps/web/kustomization.yaml")
    assert show("charts/web/values.yaml") == VALUES.replace(f"1.4@{D0}", f"1.4@{D1}")
    assert show("apps/web/deploy.yaml") == MANIFEST.replace(D0, D1)
    assert show("apps/web/marked.yaml") == MARKED.replace(D0, D1)
    assert show("README.md") == "apps\n"
    for target in targets:  # applied, with the commit; each verified later, carrying the commit
        status, digest, detail = world.status(target)
        assert (status, digest) == (TargetStatus.APPLIED, D1) and f"committed {head} to {url}#main" in detail
        assert world.state.targets.get(target).previous_image == f"{IMAGE}@{D0}"  # type: ignore[union-attr]
    sent = {(v.target_id, v.kind, v.commit, delay) for v, delay in world.verifications.sent}
    assert sent == {(t, VerificationKind.VERIFY, head, 7) for t in targets}
    events = world.state.history.of_image(IMAGE)
    assert any(e.event == ImageEvent.COMMITTED and head in (e.detail or "") for e in events)
    # the message names every target and file, never a token
    message = subprocess.run(
        ["git", "--git-dir", str(world.server.path("org/apps")), "log", "-1", "--format=%B"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert all(f"target {t}" in message for t in targets) and "charts/web/values.yaml (helm)" in message
    assert "correlation id delivery-1" in message and WRITE not in message


def test_one_commit_per_repository_per_batch_and_the_same_digest_twice_commits_nothing(world: World) -> None:
    apps = world.server.create("org/apps", FILES)
    infra = world.server.create("org/infra", FILES)
    world.claim(list(SPECS), D1)
    batch = [
        request(apps, [T_KUSTOMIZE]),
        request(infra, [T_HELM]),
        request(apps, [T_MANIFEST]),
        request(infra, [T_MARKER]),
    ]
    outcomes = [w.outcome for w in world.writer.write(batch)]
    assert outcomes == [WriteOutcome.COMMITTED] * 4
    assert len(world.server.log("org/apps")) == 2 and len(world.server.log("org/infra")) == 2
    heads = (world.server.head("org/apps"), world.server.head("org/infra"))
    # delivered again: every target is applied already, nothing is written
    assert {w.outcome for w in world.writer.write(batch)} == {WriteOutcome.SUPERSEDED}
    # claimed again at the same digest (a reconcile's heal): the files already say it, no empty commit
    world.claim(list(SPECS), D1)
    again = world.writer.write(batch)
    assert {w.outcome for w in again} == {WriteOutcome.UNCHANGED}
    assert (world.server.head("org/apps"), world.server.head("org/infra")) == heads
    assert world.status(T_HELM)[0] is TargetStatus.APPLIED and "already says it" in world.status(T_HELM)[2]


def test_never_backwards_an_older_digest_does_not_replace_a_newer_claim(world: World) -> None:
    url = world.server.create("org/apps", FILES)
    world.claim([T_KUSTOMIZE], D1, observed_at=1_000)
    world.claim([T_KUSTOMIZE], D2, observed_at=2_000)  # the tag moved on meanwhile
    older, newer = (
        request(url, [T_KUSTOMIZE], D1, observed_at=1_000),
        request(url, [T_KUSTOMIZE], D2, observed_at=2_000),
    )
    # the newer first, then the older delivered late: the older writes nothing
    assert world.writer.write([newer])[0].outcome is WriteOutcome.COMMITTED
    assert world.writer.write([older])[0].outcome is WriteOutcome.SUPERSEDED
    assert D2 in world.server.show("org/apps", "apps/web/kustomization.yaml")
    assert len(world.server.log("org/apps")) == 2
    # both in one batch, the older last: still the newer in the file
    world.claim([T_KUSTOMIZE], D2, observed_at=2_000)
    world.writer.write([newer, older])
    assert D2 in world.server.show("org/apps", "apps/web/kustomization.yaml")


def test_a_persons_commit_between_read_and_push_is_kept(world: World) -> None:
    url = world.server.create("org/apps", FILES)
    world.claim([T_HELM], D1)
    person = VALUES.replace("replicas: 2", "replicas: 5  # a person scales up")
    write = world.repos.write
    raced: list[str] = []

    def racing(*args, **kwargs):  # a person pushes to the same file after tagpin read it
        if not raced:
            raced.append(
                world.server.commit_files("org/apps", {"charts/web/values.yaml": person}, "scale up")
            )
        return write(*args, **kwargs)

    world.repos.write = racing  # type: ignore[method-assign]
    (written,) = world.writer.write([request(url, [T_HELM])])
    assert written.outcome is WriteOutcome.COMMITTED and len(world.slept) == 1  # backed off, read again
    assert world.server.show("org/apps", "charts/web/values.yaml") == person.replace(f"1.4@{D0}", f"1.4@{D1}")
    assert world.server.log("org/apps") == [f"tagpin: web:1.4@{D1[:19]}", "scale up", "initial commit"]


def test_wrong_credentials_write_nothing_say_so_and_the_request_is_written_when_it_comes_again(
    world: World,
) -> None:
    url = world.server.create("org/apps", FILES)
    world.claim([T_KUSTOMIZE], D1)
    world.secrets["tagpin/git/local"] = WRONG  # the token alone, and a wrong one
    (written,) = world.writer.write([request(url, [T_KUSTOMIZE])])
    assert written.outcome is WriteOutcome.RETRY and written.commit is None
    status, digest, detail = world.status(T_KUSTOMIZE)
    assert (status, digest) == (TargetStatus.PENDING, D1)  # still claimed: nothing lost
    assert "refused the credentials (401)" in detail and "tried again later" in detail
    assert WRONG not in detail and WRITE not in detail
    assert world.server.log("org/apps") == ["initial commit"]
    world.secrets["tagpin/git/local"] = json.dumps({"token": WRITE, "username": "tagpin-bot"})
    assert world.writer.write([request(url, [T_KUSTOMIZE])])[0].outcome is WriteOutcome.COMMITTED
    assert world.status(T_KUSTOMIZE)[0] is TargetStatus.APPLIED


def test_a_secret_that_cannot_be_read_is_named_and_never_its_value(world: World) -> None:
    url = world.server.create("org/apps", FILES)
    world.claim([T_KUSTOMIZE], D1)
    world.secrets.clear()

    def missing(name: str) -> str:
        from tagpin.adapters.secrets import SecretNotFound

        raise SecretNotFound(name)

    world.repos._token = GitTokens(  # type: ignore[attr-defined]
        lambda: {world.server.host: GitHost(credentials_secret="tagpin/git/local", insecure=True)}, missing
    )
    (written,) = world.writer.write([request(url, [T_KUSTOMIZE])])
    assert written.outcome is WriteOutcome.RETRY
    assert "the token's secret tagpin/git/local cannot be read" in world.status(T_KUSTOMIZE)[2]


def test_a_server_that_is_down_writes_nothing_and_the_request_is_written_later(world: World) -> None:
    url = world.server.create("org/apps", FILES)
    world.claim([T_MANIFEST], D1)
    world.server.down()
    (written,) = world.writer.write([request(url, [T_MANIFEST])])
    assert written.outcome is WriteOutcome.RETRY and len(world.slept) == 2  # three tries, backing off
    assert world.status(T_MANIFEST)[0] is TargetStatus.PENDING
    world.server.up()
    assert world.writer.write([request(url, [T_MANIFEST])])[0].outcome is WriteOutcome.COMMITTED
    assert D1 in world.server.show("org/apps", "apps/web/deploy.yaml")


def test_a_request_that_cannot_be_edited_fails_alone(world: World) -> None:
    url = world.server.create("org/apps", FILES)
    world.claim([T_KUSTOMIZE, T_HELM], D1)
    broken = {T_KUSTOMIZE: WriteBackFile(path="apps/web/kustomization.yaml", kind="kustomize", name="api")}
    missing = {T_HELM: WriteBackFile(path="charts/api/values.yaml", kind="helm", tag="image.tag")}
    good = request(url, [T_MARKER])
    world.claim([T_MARKER], D1)
    results = world.writer.write(
        [request(url, [T_KUSTOMIZE], files=broken), request(url, [T_HELM], files=missing), good]
    )
    assert [r.outcome for r in results] == [WriteOutcome.FAILED, WriteOutcome.FAILED, WriteOutcome.COMMITTED]
    assert world.status(T_KUSTOMIZE)[0] is TargetStatus.FAILED
    assert "no images: entry named 'api'" in world.status(T_KUSTOMIZE)[2]
    assert "charts/api/values.yaml: no such file" in world.status(T_HELM)[2]
    assert world.server.show("org/apps", "apps/web/kustomization.yaml") == KUSTOMIZATION  # untouched
    assert D1 in world.server.show("org/apps", "apps/web/marked.yaml")
    assert len(world.server.log("org/apps")) == 2


def test_a_revert_writes_the_previous_reference_back(world: World) -> None:
    url = world.server.create("org/apps", FILES)
    world.claim([T_KUSTOMIZE, T_MANIFEST], D1)
    world.writer.write([request(url, [T_KUSTOMIZE, T_MANIFEST])])
    for target in (T_KUSTOMIZE, T_MANIFEST):  # the verifier failed the digest
        world.state.targets.finish(target, D1, TargetStatus.FAILED, world.clock(), trigger=Trigger.VERIFY)
    revert = request(url, [T_KUSTOMIZE, T_MANIFEST], D1, kind=WriteKind.REVERT, reference=f"{IMAGE}@{D0}")
    (written,) = world.writer.write([revert])
    assert written.outcome is WriteOutcome.COMMITTED
    assert world.server.show("org/apps", "apps/web/deploy.yaml") == MANIFEST
    assert f"digest: {D0}" in world.server.show("org/apps", "apps/web/kustomization.yaml")
    assert world.server.log("org/apps")[0] == f"tagpin: revert web:1.4@{D0[:19]}"
    status, digest, detail = world.status(T_MANIFEST)
    assert (status, digest) == (
        TargetStatus.ROLLED_BACK,
        D1,
    ) and f"restored {IMAGE}@{D0} through Git" in detail
    # a target that moved to a newer digest meanwhile is not reverted
    world.claim([T_KUSTOMIZE], D2, observed_at=5_000)
    assert world.writer.write([revert])[0].outcome is WriteOutcome.SUPERSEDED


def test_a_revert_to_the_floating_tag_restores_the_file_as_it_was(world: World) -> None:
    """The kustomization named the tag alone before tagpin's pin (the workload ran ``web:1.4``):
    the revert's commit writes that back and takes out the digest the pin added."""
    floating = KUSTOMIZATION.replace(f"    digest: {D0}\n", "").replace('"1.3"', '"1.4"')
    url = world.server.create("org/apps", FILES | {"apps/web/kustomization.yaml": floating})
    world.claim([T_KUSTOMIZE], D1)
    pinned = request(url, [T_KUSTOMIZE]).model_copy(update={"previous": {T_KUSTOMIZE: IMAGE}})
    world.writer.write([pinned])
    assert f"digest: {D1}" in world.server.show("org/apps", "apps/web/kustomization.yaml")
    assert world.state.targets.get(T_KUSTOMIZE).previous_image == IMAGE  # type: ignore[union-attr]
    world.state.targets.finish(T_KUSTOMIZE, D1, TargetStatus.FAILED, world.clock(), trigger=Trigger.VERIFY)
    revert = request(url, [T_KUSTOMIZE], D1, kind=WriteKind.REVERT, reference=IMAGE)
    (written,) = world.writer.write([revert])
    assert written.outcome is WriteOutcome.COMMITTED
    assert world.server.show("org/apps", "apps/web/kustomization.yaml") == floating  # byte for byte
    assert world.server.log("org/apps")[0] == "tagpin: revert web:1.4"
    status, digest, detail = world.status(T_KUSTOMIZE)
    assert (status, digest) == (TargetStatus.ROLLED_BACK, D1) and f"restored {IMAGE} through Git" in detail


def test_pull_request_mode_without_the_hosts_api_fails_alone_and_writes_nothing(world: World) -> None:
    """A Writer given no API for pull requests (tests/integration/test_git_reviews.py has one)."""
    url = world.server.create("org/apps", FILES)
    world.claim([T_KUSTOMIZE, T_HELM], D1)
    review = request(url, [T_KUSTOMIZE]).model_copy(update={"mode": WriteMode.PULL_REQUEST})
    results = world.writer.write([review, request(url, [T_HELM])])
    assert [r.outcome for r in results] == [WriteOutcome.FAILED, WriteOutcome.COMMITTED]
    status, _, detail = world.status(T_KUSTOMIZE)
    assert status is TargetStatus.FAILED and "pull-request mode needs the Git host's API" in detail
    assert world.server.show("org/apps", "apps/web/kustomization.yaml") == KUSTOMIZATION
    assert world.server.branches("org/apps") == ["main"]
