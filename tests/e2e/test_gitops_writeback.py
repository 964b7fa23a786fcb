"""A workload Argo CD owns is moved by a commit, as a person sees it: the local stack with
``GitWriteBack`` (the real poller, consumer and write-back handlers on their SQS loops, moto, the
registry, a Kubernetes control plane), Git's own ``git http-backend`` with token authentication
holding the application's kustomization, and a syncer standing in for Argo CD
(tools/tagpin_local/syncer.py: ``kubectl apply -k`` of what the branch says, nothing more).

A push of the followed tag becomes one commit pinning ``stable@sha256:...`` in the kustomization;
tagpin never patches the workload itself; the syncer brings the cluster to the commit and the
verifier records the target verified; ``tagpin status`` shows it. A wrong token writes nothing,
says why, and the same change is written once the token is fixed. A digest whose rollout fails is
marked bad and reverted by a second commit, which the syncer applies."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tagpin import wiring
from tagpin.ports.state import TargetStatus
from tagpin_local.gitserver import GitServer
from tagpin_local.oci import push_image
from tagpin_local.reviewserver import ReviewServer
from tagpin_local.stack import LocalStack, StackOptions
from tagpin_local.syncer import Syncer

from tests.conftest import require_binary
from tests.support.cli import Cli, document, endpoints_file
from tests.support.stack import state_of, target_status, wait_for

pytestmark = pytest.mark.e2e

TOKEN, WRONG = "ghp_e2e_write_0123456789abcdef", "ghp_e2e_wrong_0123456789abcdef"
SECRET = "tagpin/git/local"
TARGET = "local/shop/Deployment/shop/app"
KUSTOMIZATION = "apps/shop/kustomization.yaml"
ROLLOUT = {"verify_interval_seconds": 1, "verify_timeout_seconds": 30, "soak_seconds": 0}
# progressDeadlineSeconds: a broken digest fails its rollout quickly, and a good one is not failed on
# a loaded machine (8 s failed a good digest's rollout once, at load 4.5 on 2 cores: stop 47's X1)
DEADLINE_S = 20


def deploy_yaml() -> str:
    """The application's Deployment, as its repository holds it: the label Argo CD's label tracking
    writes on what it applies, and the image name the kustomization's ``images:`` entry replaces."""
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
  namespace: shop
  labels:
    app.kubernetes.io/instance: shop   # Argo CD Application shop (label tracking)
spec:
  replicas: 2
  progressDeadlineSeconds: {DEADLINE_S}
  selector:
    matchLabels: {{app: shop}}
  template:
    metadata:
      labels: {{app: shop}}
    spec:
      containers:
        - name: app
          image: shop
"""


def kustomization(registry: str, digest: str) -> str:
    return f"""\
# the shop application (Argo CD syncs this directory)
resources:
  - namespace.yaml
  - deploy.yaml
images:
  - name: shop
    newName: {registry}/demo/shop
    newTag: stable
    digest: {digest}
"""


class World:
    def __init__(self, st: LocalStack, git: GitServer) -> None:
        assert st.registry is not None
        self.st, self.git, self.registry = st, git, st.registry
        self.image = f"{self.registry.host}/demo/shop:stable"
        self.first = push_image(self.registry.url, "demo/shop", "stable", content=b"first")
        self.url = git.create(
            "org/shop",
            {
                KUSTOMIZATION: kustomization(self.registry.host, self.first),
                "apps/shop/deploy.yaml": deploy_yaml(),
                "apps/shop/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
                "README.md": "the shop's manifests\n",
            },
        )
        self.syncer = Syncer(git, "org/shop", "apps/shop", st.kube)
        self.syncer.sync()  # Argo CD's first sync: the workload exists, pinned to the first digest
        self.token(TOKEN)
        self.configure()

    def token(self, token: str) -> None:
        self.st.put_secret(SECRET, json.dumps({"token": token}))

    def configure(self, **entry: Any) -> None:
        target = {
            "cluster": "local",
            "namespace": "shop",
            "kind": "Deployment",
            "name": "shop",
            "container": "app",
        }
        self.st.options.images, self.st.options.rollout = (
            [{"image": self.image, "targets": [target]}],
            ROLLOUT,
        )
        config = self.st.config_document()
        host = {"credentials_secret": SECRET, "insecure": True}
        if "api_url" in entry:  # pull-request mode: the stand-in for GitHub's API
            host |= {"kind": "github", "api_url": entry.pop("api_url")}
        config["gitops"] = {
            "hosts": {self.git.host: host},
            "write_back": [
                {
                    "image": self.image,
                    "repository": self.url,
                    "files": [{"path": KUSTOMIZATION, "kind": "kustomize"}],
                    **entry,
                }
            ],
        }
        self.st.write_config(config)

    def running(self) -> str:
        workload = self.st.kube.get("Deployment", "shop", "shop")
        return str(workload["spec"]["template"]["spec"]["containers"][0]["image"])

    def status(self, digest: str) -> TargetStatus | None:
        return target_status(self.st, TARGET, digest)

    def detail(self) -> str:
        st = state_of(self.st).targets.get(TARGET)
        return (st.detail or "") if st is not None else ""

    def shown(self, digest: str) -> dict[str, Any]:
        """What a wait that timed out shows: the target, the image's trail, the queues' depths."""
        st = state_of(self.st).targets.get(TARGET)
        sqs = self.st.client("sqs")
        depths = {
            name: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            for name, url in (("changes", self.st.queue_url), ("write-back", self.st.writeback_url))
        }
        return {
            "target": None if st is None else (st.status, st.digest == digest, st.detail),
            "trail": [(e.event, e.detail) for e in state_of(self.st).history.of_image(self.image)][-6:],
            "queues": {
                n: {k: v for k, v in a.items() if k.startswith("ApproximateNumberOfMessages")}
                for n, a in depths.items()
            },
            "errors": {n: s.errors[-3:] for n, s in self.st.sources.items()},
        }


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    require_binary("git-http-backend", "/usr/lib/git-core/git-http-backend")
    require_binary("kubectl")
    options = StackOptions(
        notifications=False, poll_interval=None, consume=True, rollout_delay=0.2, git_write_back=True
    )
    with GitServer(tokens={TOKEN: "write"}) as git, LocalStack(options) as st:
        built = World(st, git)
        yield built
        built.syncer.stop()


@pytest.fixture(scope="module")
def cli(world: World, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    cli = Cli(world.st, endpoints_file(world.st, tmp_path_factory.mktemp("cli") / "endpoints.json"))
    cli.extra |= {TOKEN, WRONG}  # the Git tokens are never printed
    return cli


def console_target(st: LocalStack) -> str:
    """The target's page as a person reads it: signed in with the local token, over HTTP."""
    with httpx.Client(base_url=st.console_url.removesuffix("/console"), timeout=60) as console:
        assert console.post("/console/signin", data={"token": st.console_token}).status_code == 303
        answer = console.get("/console/target", params={"id": TARGET})
        assert answer.status_code == 200, answer.text[:500]
        return answer.text


def row(cli: Cli, image: str) -> dict[str, Any]:
    (found,) = [r for r in document(cli("--json", "status")) if r["image"] == image]
    return {t["target"]: t for t in found["targets"]}[TARGET]


def test_a_push_is_committed_and_the_gitops_tool_brings_the_cluster_to_it(world: World, cli: Cli) -> None:
    world.syncer.sync()
    before, head, commits = world.running(), world.git.head("org/shop"), len(world.git.log("org/shop"))
    assert before.startswith(f"{world.image}@sha256:")  # Argo CD applied the pinned reference
    digest = push_image(world.registry.url, "demo/shop", "stable", content=b"second")
    # plan, before the poll: it would roll, through Git (exit code 4: something would roll)
    (planned,) = [r for r in cli.json("plan", code=4) if r["image"] == world.image]
    assert planned["action"] == "roll" and planned["detail"].startswith(f"through Git: {world.url}#main")
    world.st.run_poller()
    commit = wait_for("tagpin's commit", lambda: (h := world.git.head("org/shop")) != head and h)
    assert world.git.log("org/shop")[0] == f"tagpin: shop:stable@{digest[:19]}"
    assert world.git.show("org/shop", KUSTOMIZATION) == kustomization(world.registry.host, digest)
    wait_for("the target applied through Git", lambda: world.status(digest) is TargetStatus.APPLIED)
    # the detail names the commit and the owner (tagpin status shows it)
    assert world.detail().endswith(
        f"committed {commit} to {world.url}#main (Argo CD Application shop applies it)"
    )
    assert world.running() == before  # tagpin never patched the workload behind Git's back
    page = console_target(world.st)  # the console's target page, signed in over HTTP
    assert (
        html.escape(f"committed {commit} to {world.url}#main (Argo CD Application shop applies it)") in page
    )
    # the verifier waits for the GitOps tool: still applied, not failed, while nothing syncs; a
    # reconcile meanwhile takes the workload still on the old digest for no person's change
    world.st.run_reconciler()
    assert world.status(digest) is TargetStatus.APPLIED
    assert world.syncer.sync() == commit  # Argo CD syncs the commit
    assert world.running() == f"{world.image}@{digest}"
    wait_for("the rollout verified", lambda: world.status(digest) is TargetStatus.VERIFIED)
    shown = row(cli, world.image)
    assert shown["condition"] == "current", shown
    history = state_of(world.st).history.of_image(world.image)
    assert any(e.event == "committed" and commit in (e.detail or "") for e in history)
    # the same digest again (a reconcile's heal): no second commit, no empty commit
    world.st.run_reconciler()
    world.st.run_poller()
    assert world.git.head("org/shop") == commit and len(world.git.log("org/shop")) == commits + 1


def test_a_wrong_token_writes_nothing_says_why_and_the_change_is_written_once_it_is_fixed(
    world: World, cli: Cli
) -> None:
    world.syncer.sync()
    head = world.git.head("org/shop")
    world.token(WRONG)
    wiring.reset()  # a container started since (one that ran keeps a token a minute, until refused)
    digest = push_image(world.registry.url, "demo/shop", "stable", content=b"third")
    world.st.run_poller()
    wait_for("the refusal recorded", lambda: "refused the credentials (401)" in world.detail())
    assert world.status(digest) is TargetStatus.PENDING and world.git.head("org/shop") == head
    shown = row(cli, world.image)
    assert "refused the credentials (401)" in shown.get("detail", ""), shown
    world.token(TOKEN)  # fixed: the request comes back on its redelivery schedule and is written
    wait_for("the commit", lambda: world.git.head("org/shop") != head, deadline_s=90)
    assert digest in world.git.show("org/shop", KUSTOMIZATION)
    world.syncer.sync()
    wait_for("verified", lambda: world.status(digest) is TargetStatus.VERIFIED)


def test_a_failed_rollout_marks_the_digest_bad_and_a_revert_commit_restores_the_previous_reference(
    world: World,
) -> None:
    world.syncer.sync()
    good = world.running()
    bad = push_image(world.registry.url, "demo/shop", "stable", content=b"broken")
    world.st.kube.break_image(bad)
    world.syncer.start(interval=0.5)  # Argo CD's automated sync from here on
    try:
        world.st.run_poller()
        wait_for("the bad digest committed", lambda: bad in world.git.show("org/shop", KUSTOMIZATION))
        wait_for("the rollout failed and reverted", lambda: world.status(bad) is TargetStatus.ROLLED_BACK, 90)
        assert world.git.log("org/shop")[0] == f"tagpin: revert shop:stable@{good.rsplit('@', 1)[1][:19]}"
        assert good.rsplit("@", 1)[1] in world.git.show("org/shop", KUSTOMIZATION)
        assert "restored" in world.detail() and "through Git" in world.detail()
        tag = state_of(world.st).tags.get(world.image)
        assert tag is not None and tag.blocked and tag.digest == bad  # marked bad: not written again
        wait_for("the cluster back on the good digest", lambda: world.running() == good)
    finally:
        world.syncer.stop()
        world.st.kube.repair_image(bad)


def test_pull_request_mode_opens_a_request_and_the_target_moves_once_it_is_merged(
    world: World, cli: Cli
) -> None:
    """The stack's write-back function (its wiring, the host's token) opens the request through a
    stand-in for GitHub's API (tools/tagpin_local/reviewserver.py); the deployed branch and the
    cluster wait for a person's merge; after it the syncer applies it and the next reconcile records
    the target verified."""
    world.syncer.sync()
    head, before = world.git.head("org/shop"), world.running()
    with ReviewServer(world.git) as api:
        world.configure(mode="pull-request", api_url=api.url)
        try:
            digest = push_image(world.registry.url, "demo/shop", "stable", content=b"reviewed")
            world.st.run_poller()
            wait_for("the pull request", lambda: api.posts == 1 and "awaiting review" in world.detail())
            (review,) = api.reviews
            branch = "tagpin/shop-stable-" + digest.split(":")[1][:12]
            assert (review.source, review.target) == (branch, "main")
            page = f"{world.git.url}/org/shop/pull/{review.number}"
            assert world.git.head("org/shop") == head and world.running() == before  # nothing deployed
            assert digest in world.git.show("org/shop", KUSTOMIZATION, rev=branch)
            assert world.status(digest) is TargetStatus.PENDING
            shown = row(cli, world.image)
            assert f"awaiting review: pull request {page} opened for {branch}" in shown.get("detail", ""), (
                shown
            )
            assert shown["detail"].endswith("(Argo CD Application shop applies it)"), shown
            history = state_of(world.st).history.of_image(world.image)
            assert any(e.event == "committed" and page in (e.detail or "") for e in history)
            world.st.run_reconciler()  # the heal sends it again: no second request
            wait_for("the heal written", lambda: f"pull request {page} open for" in world.detail())
            assert api.posts == 1
            merged = api.merge("org/shop", review.number)  # a person merges it
            assert world.syncer.sync() == merged and world.running() == f"{world.image}@{digest}"
            world.st.run_reconciler()
            wait_for(
                "verified after the merge",
                lambda: world.status(digest) is TargetStatus.VERIFIED,
                shown=lambda: world.shown(digest),
            )
        finally:
            world.configure()


def test_a_pull_request_closed_without_merge_holds_the_target_and_a_reconcile_opens_no_other(
    world: World, cli: Cli
) -> None:
    """A person closes tagpin's request: the reconciler's heal delivers the pin again, and the
    write-back reads the request back: the target is held on the digest with the request's URL
    (``tagpin status`` shows it), nothing is pushed or opened again, the cluster is untouched.
    ``tagpin release`` after reopening the request lets it go on, and the merge settles it (so the
    module's other tests find no target left waiting)."""
    world.syncer.sync()
    before = world.running()
    with ReviewServer(world.git) as api:
        world.configure(mode="pull-request", api_url=api.url)
        try:
            digest = push_image(world.registry.url, "demo/shop", "stable", content=b"declined")
            world.st.run_poller()
            wait_for("the pull request", lambda: api.posts == 1 and "awaiting review" in world.detail())
            (review,) = api.reviews
            page = f"{world.git.url}/org/shop/pull/{review.number}"
            api.close("org/shop", review.number)  # a person declines it
            world.st.run_reconciler()
            wait_for("the target held", lambda: world.status(digest) is TargetStatus.HELD)
            shown = row(cli, world.image)
            assert shown["condition"] == "held", shown
            assert f"pull request {page} was closed without merge" in shown["detail"], shown
            world.st.run_reconciler()  # held: nothing sent again
            assert api.posts == 1 and world.status(digest) is TargetStatus.HELD
            assert world.running() == before  # the cluster untouched

            api.reopen("org/shop", review.number)  # the person changes their mind
            assert cli.json("release", TARGET)["released"] is True
            world.st.run_reconciler()
            wait_for("awaiting review again", lambda: f"pull request {page} open for" in world.detail())
            assert api.posts == 1 and world.status(digest) is TargetStatus.PENDING

            merged = api.merge("org/shop", review.number)  # and merges it: the target ends settled
            assert world.syncer.sync() == merged
            world.st.run_reconciler()
            wait_for(
                "verified after the merge",
                lambda: world.status(digest) is TargetStatus.VERIFIED,
                shown=lambda: world.shown(digest),
            )
        finally:
            world.configure()
