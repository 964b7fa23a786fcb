"""The consumer's side of the write-back (docs/gitops.md): an owned workload that
``gitops.write_back`` configures is claimed and handed to Git instead of refused, after the same
gates as a live patch; one write request per repository and branch for a change (500 targets in
50 repositories: 50 requests); the verifier waits for the GitOps tool to apply the commit, and on
a failure or a timeout sends a revert to Git instead of patching the workload live. Without a
write-back queue an owned target is refused as before."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin.domain.config import GitOpsSettings, RolloutSettings, parse_config
from tagpin.domain.gitops.writes import WriteKind, WriteRequest
from tagpin.domain.messages import Change, Trigger, Verification, VerificationKind
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome, VerificationOutcome
from tagpin.ports.state import State, TargetStatus
from tagpin.ports.workloads import Workload
from tagpin.usecases.apply import Applier
from tagpin.usecases.gitrevert import GitReverts
from tagpin.usecases.gitroute import GitRoute
from tagpin.usecases.promote import Promoter
from tagpin.usecases.verify import Verifier

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0, D1
from tests.support.queues import ListQueue, ListVerificationQueue

IMAGE = "127.0.0.1:5000/demo/web:stable"
ARGO = {"app.kubernetes.io/instance": "shop"}
REPO = "https://git.example.com/org/apps.git"
COMMIT = "c" * 40


class ListWriteQueue:
    def __init__(self) -> None:
        self.sent: list[WriteRequest] = []

    def send(self, request: WriteRequest) -> None:
        self.sent.append(request)


def config(names: list[str]) -> Any:
    targets = "\n".join(
        f"      - {{cluster: dev, namespace: demo, name: {n}, container: app}}" for n in names
    )
    head = "clusters:\n  dev: {kubeconfig: {file: /dev/null}}\nimages:\n"
    return parse_config(f"{head}  - image: {IMAGE}\n    targets:\n{targets}\n")


def gitops(repositories: int = 1, names: list[str] | None = None) -> GitOpsSettings:
    """``web-<i>`` written to ``apps-<i % repositories>``, each in its own kustomization."""
    entries = [
        {
            "image": IMAGE,
            "targets": [f"dev/demo/Deployment/{name}"],
            "repository": f"https://git.example.com/org/apps-{i % repositories}.git",
            "files": [{"path": f"apps/{name}/kustomization.yaml", "kind": "kustomize"}],
        }
        for i, name in enumerate(names or ["web"])
    ]
    return GitOpsSettings.model_validate({"write_back": entries})


def workload(name: str, labels: dict[str, str] | None = None) -> Workload:
    return Workload(
        "1", {"app": f"{IMAGE}@{D0}"}, namespace="demo", name=name, labels=ARGO if labels is None else labels
    )


class World:
    def __init__(self, store: State, names: list[str], settings: GitOpsSettings, queue: bool = True) -> None:
        self.store, self.names = store, names
        self.cluster = FakeCluster([workload(n) for n in names])
        self.clusters = FakeClusters(dev=self.cluster)
        self.writes = ListWriteQueue()
        self.verifications = ListVerificationQueue()
        self.clock = FakeClock(1_800_000_000_000, step=1_000)
        self.rollout = RolloutSettings(verify_timeout_seconds=60, verify_interval_seconds=5)
        self.followed = config(names).followed
        self.route = GitRoute(lambda: settings, self.writes if queue else None)
        self.applier = Applier(
            followed=lambda: self.followed,
            state=store,
            workloads=self.clusters,
            clock=self.clock,
            settings=lambda: self.rollout,
            verifications=self.verifications,
            gitops=lambda: settings,
            git=self.route,
        )
        promoter = Promoter(
            state=store,
            followed=lambda: self.followed,
            settings=lambda: self.rollout,
            verifications=self.verifications,
            changes=ListQueue(),
            notifier=None,
            clock=self.clock,
        )
        self.verifier = Verifier(
            state=store,
            workloads=self.clusters,
            followed=lambda: self.followed,
            settings=lambda: self.rollout,
            verifications=self.verifications,
            promoter=promoter,
            notifier=None,
            clock=self.clock,
            git=GitReverts(lambda: settings, self.route),
        )


def change(digest: str = D1, observed_at: int = 1_000) -> Change:
    return Change(
        move=Move(
            image=IMAGE, digest=digest, observed_at=observed_at, trigger=Trigger.POLL, correlation_id="c-1"
        )
    )


def test_an_owned_target_with_write_back_is_claimed_and_sent_to_git_not_patched(store: State) -> None:
    world = World(store, ["web"], gitops())
    (result,) = world.applier.apply(change())
    assert result.outcome is ApplyOutcome.WRITE_BACK and world.cluster.patches == []
    st = store.targets.get("dev/demo/Deployment/web/app")
    assert st is not None and (st.status, st.digest) == (TargetStatus.PENDING, D1)  # claimed
    (request,) = world.writes.sent
    assert request.previous == {"dev/demo/Deployment/web/app": f"{IMAGE}@{D0}"}  # recorded with the commit
    # who applies it, named by the consumer that read the workload (the targets' detail after the commit)
    assert request.owners == {"dev/demo/Deployment/web/app": "Argo CD Application shop"}
    assert (request.kind, request.repository, request.branch) == (
        WriteKind.PIN,
        REPO.replace("apps", "apps-0"),
        "main",
    )
    assert request.reference == f"{IMAGE}@{D1}" and request.targets == ("dev/demo/Deployment/web/app",)
    assert request.move.correlation_id == "c-1" and request.group == request.repository
    assert world.verifications.sent == []  # the write-back function verifies after its commit


def test_without_a_write_back_queue_an_owned_target_is_refused_as_before(store: State) -> None:
    world = World(store, ["web"], gitops(), queue=False)
    (result,) = world.applier.apply(change())
    assert result.outcome is ApplyOutcome.OWNED and world.writes.sent == [] and world.cluster.patches == []


def test_an_owned_target_nothing_configures_is_refused_and_a_free_one_is_patched(store: State) -> None:
    world = World(store, ["web", "api", "free"], gitops(names=["web"]))
    world.cluster.add(workload("free", labels={}))
    results = {r.target: r.outcome for r in world.applier.apply(change())}
    assert results == {
        "dev/demo/Deployment/web/app": ApplyOutcome.WRITE_BACK,
        "dev/demo/Deployment/api/app": ApplyOutcome.OWNED,
        "dev/demo/Deployment/free/app": ApplyOutcome.PATCHED,
    }
    assert [r.targets for r in world.writes.sent] == [("dev/demo/Deployment/web/app",)]


def test_500_targets_in_50_repositories_are_50_requests(store: State) -> None:
    names = [f"web-{i}" for i in range(500)]
    world = World(store, names, gitops(repositories=50, names=names))
    results = world.applier.apply(change())
    assert {r.outcome for r in results} == {ApplyOutcome.WRITE_BACK} and world.cluster.patches == []
    assert len(world.writes.sent) == 50 and len({r.repository for r in world.writes.sent}) == 50
    assert sorted(len(r.targets) for r in world.writes.sent) == [10] * 50


def test_a_repositorys_request_is_sent_as_soon_as_its_targets_are_decided(store: State) -> None:
    names = [f"web-{i}" for i in range(30)]
    entries = [
        {
            "image": IMAGE,
            "targets": [f"dev/demo/Deployment/web-{i}" for i in range(10 * r, 10 * r + 10)],
            "repository": f"https://git.example.com/org/apps-{r}.git",
            "files": [{"path": "apps.yaml", "kind": "manifest"}],
        }
        for r in range(3)
    ]
    world = World(store, names, GitOpsSettings.model_validate({"write_back": entries}))
    read_when_sent: list[int] = []
    send = world.writes.send
    world.writes.send = lambda request: (read_when_sent.append(len(world.cluster.gets)), send(request))  # type: ignore[method-assign]
    world.applier.apply(change())
    # each repository's request left once its ten workloads were read, not after all thirty
    assert read_when_sent == [10, 20, 30]
    assert [len(r.targets) for r in world.writes.sent] == [10, 10, 10]


def test_the_gates_decide_first_a_digest_marked_bad_or_a_dry_run_writes_nothing(store: State) -> None:
    world = World(store, ["web"], gitops())
    world.rollout = RolloutSettings(dry_run=True)
    (planned,) = world.applier.apply(change())
    assert planned.outcome is ApplyOutcome.PLANNED and world.writes.sent == []
    store.tags.record(IMAGE, D0, 500, "poll")
    store.tags.record(IMAGE, D0, 600, "poll")
    store.tags.record(IMAGE, D1, 1_000, "poll")
    assert store.tags.mark_bad(IMAGE, D1, "failed before", 2_000)
    world.rollout = RolloutSettings()
    (blocked,) = World(store, ["web"], gitops()).applier.apply(change())
    assert blocked.outcome is ApplyOutcome.BLOCKED and world.writes.sent == []


def verification(commit: str | None = COMMIT, applied_at: int = 1_800_000_000_000) -> Verification:
    return Verification(
        kind=VerificationKind.VERIFY,
        move=Move(image=IMAGE, digest=D1, observed_at=1_000, trigger=Trigger.POLL),
        target_id="dev/demo/Deployment/web/app",
        applied_at=applied_at,
        commit=commit,
    )


def written(world: World) -> None:
    """As the write-back function leaves it after its commit."""
    world.store.tags.record(IMAGE, D1, 1_000, "poll")
    world.applier.apply(change())
    (request,) = world.writes.sent
    world.store.targets.finish(
        "dev/demo/Deployment/web/app",
        D1,
        TargetStatus.APPLIED,
        world.clock(),
        trigger=Trigger.POLL,
        previous_image=request.previous.get("dev/demo/Deployment/web/app"),
        expected=frozenset({TargetStatus.PENDING}),
    )
    world.writes.sent.clear()


def test_the_verifier_waits_for_the_gitops_tool_to_apply_the_commit(store: State) -> None:
    world = World(store, ["web"], gitops())
    written(world)
    result = world.verifier.verify(verification(applied_at=world.clock.now))
    assert result.outcome is VerificationOutcome.PROGRESSING and f"commit {COMMIT[:12]}" in result.detail
    (again, delay), *_ = world.verifications.sent
    assert again.commit == COMMIT and delay == 5
    # without a commit the same workload is one a person changed since the patch
    assert world.verifier.verify(verification(commit=None)).outcome is VerificationOutcome.CHANGED


@pytest.mark.parametrize("previous", [f"{IMAGE}@{D0}", IMAGE])
def test_a_commit_never_applied_in_time_fails_the_digest_and_is_reverted_through_git(
    store: State, previous: str
) -> None:
    world = World(store, ["web"], gitops())
    world.cluster.add(Workload("1", {"app": previous}, namespace="demo", name="web", labels=ARGO))
    written(world)
    late = world.clock.now - 61_000  # committed longer ago than verify_timeout_seconds
    result = world.verifier.verify(verification(applied_at=late))
    assert result.outcome is VerificationOutcome.FAILED and "waiting for commit" in result.detail
    assert world.cluster.patches == []  # never patched behind Git's back
    tag = store.tags.get(IMAGE)
    assert tag is not None and tag.blocked and tag.digest == D1  # marked bad
    st = store.targets.get("dev/demo/Deployment/web/app")
    assert st is not None and st.status is TargetStatus.FAILED
    # pinned before, or the floating tag alone (written back as it was: the file named no digest)
    (revert,) = world.writes.sent
    assert (revert.kind, revert.reference, revert.move.digest) == (WriteKind.REVERT, previous, D1)
    assert revert.move.trigger is Trigger.ROLLBACK and "waiting for commit" in (revert.reason or "")
    assert revert.pin().pinned is previous.endswith(D0)


def test_a_target_of_one_image_is_written_to_one_repository() -> None:
    with pytest.raises(ValueError, match="written to one repository and branch"):
        GitOpsSettings.model_validate(
            {
                "write_back": [
                    {"image": IMAGE, "repository": REPO, "files": [{"path": "a.yaml", "kind": "manifest"}]},
                    {
                        "image": IMAGE,
                        "targets": ["dev/*/Deployment/web"],
                        "repository": REPO.replace("apps", "infra"),
                        "files": [{"path": "b.yaml", "kind": "manifest"}],
                    },
                ]
            }
        )
    # disjoint targets may go to different repositories
    GitOpsSettings.model_validate(
        {
            "write_back": [
                {
                    "image": IMAGE,
                    "targets": ["dev/*/*/web"],
                    "repository": REPO,
                    "files": [{"path": "a.yaml", "kind": "manifest"}],
                },
                {
                    "image": IMAGE,
                    "targets": ["dev/*/*/api"],
                    "repository": REPO + "x",
                    "files": [{"path": "a.yaml", "kind": "manifest"}],
                },
            ]
        }
    )


@pytest.mark.parametrize(
    ("status", "drift"), [(TargetStatus.APPLIED, "undecided"), (TargetStatus.VERIFIED, "person")]
)
def test_a_reconcile_before_the_gitops_tool_applies_the_commit_holds_nothing(
    store: State, status: TargetStatus, drift: str
) -> None:
    """Committed (applied) and not synced yet: no person's change; verified, then another image:
    someone's (a commit reverted in Git, say), held as for any target."""
    from tagpin.usecases.audit import Audit
    from tagpin.usecases.drift import PeopleFirst
    from tagpin.usecases.running import Observed

    world = World(store, ["web"], gitops())
    store.tags.record(IMAGE, D1, 1_000, "poll")
    target = "dev/demo/Deployment/web/app"
    store.targets.claim(target, IMAGE, D1, 1_000, Trigger.POLL, 1)
    store.targets.finish(target, D1, status, 2, trigger=Trigger.POLL)
    people = PeopleFirst(store, world.clusters, Audit(store, None), world.clock, lambda: gitops())
    tag = store.tags.get(IMAGE)
    assert tag is not None
    seen = Observed(world.followed[IMAGE].targets[0], IMAGE, D0, "pinned")
    assert people.recheck(seen, tag, store.targets.get(target)).drift.value == drift
