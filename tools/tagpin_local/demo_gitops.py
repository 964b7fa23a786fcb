"""The demo's GitOps part (:mod:`tagpin_local.demo`, step 7; docs/gitops.md): a workload that an
Argo CD application owns is moved by a commit, never by a patch.

The application's manifests live in a repository on a real Git server (Git's own
``git http-backend`` on 127.0.0.1, token authentication: :mod:`tagpin_local.gitserver`): a
kustomization that pins ``demo/site:stable@sha256:...`` and a Deployment carrying the label Argo
CD's label tracking writes (``app.kubernetes.io/instance: site``). The syncer stand-in
(:mod:`tagpin_local.syncer`: ``kubectl apply -k`` of the branch's head, nothing more; it is not
Argo CD) applies every new commit. A push of the tag becomes tagpin's commit in the
kustomization; the syncer brings the cluster to it; the verifier records the target verified.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field

from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.channels import FollowedKey
from tagpin.domain.gitops.owners import Owner, owner_of
from tagpin.ports.state import TargetStatus

from tagpin_local.demo_common import ROLLOUT, wait
from tagpin_local.gitserver import GitServer
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack
from tagpin_local.syncer import Syncer

REPOSITORY = "demo/site"  # on the Git server
APP = "apps/site"  # the path the application syncs
KUSTOMIZATION = f"{APP}/kustomization.yaml"
TARGET = "local/site/Deployment/site/site"
SECRET = "tagpin/git/demo"  # noqa: S105 (a secret's name)

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: site
  namespace: site
  labels:
    app.kubernetes.io/instance: site   # what Argo CD's label tracking writes: Application site
spec:
  replicas: 2
  selector:
    matchLabels: {app: site}
  template:
    metadata:
      labels: {app: site}
    spec:
      containers:
        - name: site
          image: site
"""


def kustomization(registry: str, digest: str) -> str:
    return f"""\
# the site application (Argo CD syncs this directory)
resources:
  - namespace.yaml
  - deploy.yaml
images:
  - name: site
    newName: {registry}/demo/site
    newTag: stable
    digest: {digest}
"""


@dataclass
class GitOps:
    image: str
    owner: str  # as tagpin names it
    repository: str  # the Git URL tagpin writes to
    digest: str  # the pushed image's
    commit: str  # tagpin's commit
    commit_message: str  # its subject
    kustomization_after: str
    before: str  # the live workload's image before the push
    after: str  # and once the syncer applied the commit
    annotations: dict[str, str] = field(default_factory=dict)  # the pod template's, after (no tagpin.dev/*)
    synced: list[str] = field(default_factory=list)  # the commits the syncer applied, oldest first
    status: str = ""  # the target's, at the end
    recorded: list[str] = field(default_factory=list)  # the image's history: its committed events
    push_to_commit_s: float = 0.0
    push_to_running_s: float = 0.0
    push_to_verified_s: float = 0.0


def _site_image(stack: LocalStack) -> str:
    workload = stack.kube.get("Deployment", "site", "site")
    return str(workload["spec"]["template"]["spec"]["containers"][0]["image"])


def _application(stack: LocalStack, git: GitServer, image: str) -> tuple[str, Syncer, Owner]:
    """The application's repository, its first sync and tagpin's write-back configuration: the
    repository's URL, the syncer and the owner tagpin sees on the workload."""
    assert stack.registry is not None
    first = push_image(stack.registry.url, "demo/site", "stable", content=b"site 1")
    url = git.create(
        REPOSITORY,
        {
            KUSTOMIZATION: kustomization(stack.registry.host, first),
            f"{APP}/deploy.yaml": DEPLOYMENT,
            f"{APP}/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: site}\n",
        },
    )
    token = secrets.token_urlsafe(24)  # the demo's Git token: in the secret store, never printed
    git.tokens[token] = "write"
    stack.put_secret(SECRET, json.dumps({"token": token}))
    syncer = Syncer(git, REPOSITORY, APP, stack.kube)
    syncer.sync()  # the application's first sync: the workload exists, pinned to the first digest
    workload = stack.kube.get("Deployment", "site", "site")["metadata"]
    owner = owner_of(workload.get("labels") or {}, workload.get("annotations") or {})
    assert owner is not None
    print(f"\n== GitOps: Deployment site/site is managed by {owner} ({owner.evidence})")
    print(f"   its manifests: {url} {APP}/ (a kustomization pinning {image}@{first[:19]}...)")
    print("   a syncer standing in for Argo CD applies each new commit with kubectl apply -k (nothing more)")
    stack.options.images = [
        {
            "image": image,
            "targets": [
                {
                    "cluster": "local",
                    "namespace": "site",
                    "kind": "Deployment",
                    "name": "site",
                    "container": "site",
                }
            ],
        }
    ]
    stack.options.rollout = ROLLOUT
    config = stack.config_document()
    config["gitops"] = {
        "hosts": {git.host: {"credentials_secret": SECRET, "insecure": True}},
        "write_back": [
            {"image": image, "repository": url, "files": [{"path": KUSTOMIZATION, "kind": "kustomize"}]}
        ],
    }
    stack.write_config(config)
    print(f"   gitops.write_back: {image} -> {url}#main {KUSTOMIZATION} (kind kustomize)")
    return url, syncer, owner


def gitops_scenario(stack: LocalStack, git: GitServer) -> GitOps:
    """An Argo-owned Deployment moved by tagpin's commit and the syncer stand-in's apply."""
    assert stack.registry is not None
    state = dynamodb_state(stack.client("dynamodb"), "tagpin-state")
    image = f"{stack.registry.host}/demo/site:stable"
    url, syncer, owner = _application(stack, git, image)
    before, head = _site_image(stack), git.head(REPOSITORY)
    syncer.start(interval=0.2)  # the application's automated sync from here on
    try:
        digest = push_image(stack.registry.url, "demo/site", "stable", content=b"site 2")
        started = time.monotonic()
        wait("tagpin's commit", lambda: git.head(REPOSITORY) != head)
        pushed = time.monotonic() - started
        commit = git.head(REPOSITORY) or ""
        message = git.log(REPOSITORY)[0]
        print(f"   new image pushed under the tag; tagpin committed {commit} ({pushed:.1f} s after the push)")
        print(f"   commit: {message!r}")
        wait("the syncer applying the commit", lambda: _site_image(stack).endswith("@" + digest))
        running = time.monotonic() - started
        print(f"   the syncer applied it: the Deployment runs {_site_image(stack)}")
        print(f"   ({running:.1f} s after the push)")

        def verified() -> bool:
            st = state.targets.get(TARGET)
            return st is not None and st.digest == digest and st.status is TargetStatus.VERIFIED

        wait("the target verified", verified)
        done = time.monotonic() - started
    finally:
        syncer.stop()
    target = state.targets.get(TARGET)
    assert target is not None
    result = GitOps(
        image=image,
        owner=str(owner),
        repository=url,
        digest=digest,
        commit=commit,
        commit_message=message,
        kustomization_after=git.show(REPOSITORY, KUSTOMIZATION),
        before=before,
        after=_site_image(stack),
        annotations=dict(
            stack.kube.get("Deployment", "site", "site")["spec"]["template"]["metadata"].get("annotations")
            or {}
        ),
        synced=list(syncer.synced),
        status=target.status.value,
        recorded=[
            e.detail or "" for e in state.history.of_image(FollowedKey(image)) if e.event == "committed"
        ],
        push_to_commit_s=pushed,
        push_to_running_s=running,
        push_to_verified_s=done,
    )
    print(f"   target {TARGET}: {result.status} ({done:.1f} s after the push)")
    for detail in result.recorded:
        print(f"   history: {detail}")
    print(f"   tagpin never patched it: the syncer applied {', '.join(c[:12] for c in result.synced)}")
    return result
