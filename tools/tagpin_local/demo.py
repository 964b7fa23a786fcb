"""``make demo``: a moved tag becomes a rolled Deployment, through both paths, on 127.0.0.1.

1. A Deployment runs ``<registry>/demo/web:stable``; the first image is pushed and tagpin pins it.
2. Webhook path: a new image is pushed under the same tag; the registry's real push notification
   reaches the webhook handler, which re-resolves the tag and enqueues; the consumer patches.
3. Scheduled path: notifications switched off, polling on; another push; the poller notices.
4. Safe rollout: a Deployment ``shop`` runs in two more clusters, ``stage`` (wave 1, with the
   local cluster) and ``prod`` (wave 2). A good image walks through both waves (verified in stage,
   soak, then prod); then a broken image is pushed (its pods never become available): stage
   fails to roll out, tagpin restores the previous image there, marks the digest bad and halts
   the promotion; prod is never touched. The SNS notifications are shown.
5. Version channel: ``demo/app@stable`` (policy ``^1``) in stage and prod; stage takes 1.1.0,
   1.2.0 and 1.3.0 as they are pushed, prod goes from 1.0.0 straight to 1.3.0.
6. Approval: the prod wave now asks for a person (``approval: true``); 1.4.0 is verified in stage,
   soaks, and waits (``awaiting_approval``, prod unchanged); it is approved as the console's
   Approve button does it, over HTTP (sign in with the local token, the CSRF token read from the
   overview, ``POST /console/actions/approve``); prod rolls to 1.4.0.
7. GitOps (docs/gitops.md): a Deployment ``site`` labelled as Argo CD's Application ``site`` is
   moved by a commit, never patched: its manifests are in a repository on a real Git server (``git
   http-backend``, token authentication), a push becomes tagpin's commit in the kustomization, and
   a syncer standing in for Argo CD (``kubectl apply -k`` of the branch's head, nothing more)
   brings the cluster to it; the commit id and the workload reaching the digest are shown.

Prints the image before and after each step, the time from push to patch, and from push to
verified. Exits non-zero if a step does not happen within its deadline.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from tagpin_local.demo_channels import Approval, Channel, approval_scenario, versions_scenario
from tagpin_local.demo_common import DEADLINE_S, ROLLOUT, SHOP, SOAK_S
from tagpin_local.demo_gitops import GitOps, gitops_scenario
from tagpin_local.demo_rollback import Rollback, rollback_scenario
from tagpin_local.endpoints import LocalEndpoints
from tagpin_local.gitserver import GitServer
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

__all__ = [
    "DEADLINE_S",
    "ROLLOUT",
    "SHOP",
    "SOAK_S",
    "Approval",
    "Channel",
    "GitOps",
    "Results",
    "Rollback",
    "Step",
    "approval_scenario",
    "current_image",
    "document",
    "figures",
    "gitops_scenario",
    "main",
    "rollback_scenario",
    "run",
    "versions_scenario",
    "wait_for_digest",
]


@dataclass
class Step:
    path: str
    before: str
    after: str
    digest: str
    push_to_patch_s: float
    annotations: dict[str, str]


def current_image(stack: LocalStack) -> tuple[str, dict[str, str]]:
    template = stack.kube.get("Deployment", "default", "web")["spec"]["template"]
    image: str = template["spec"]["containers"][0]["image"]
    return image, dict(template["metadata"].get("annotations") or {})


def wait_for_digest(stack: LocalStack, digest: str, started: float) -> tuple[str, dict[str, str], float]:
    while time.monotonic() - started < DEADLINE_S:
        image, annotations = current_image(stack)
        if image.endswith("@" + digest):
            return image, annotations, time.monotonic() - started
        time.sleep(0.005)
    image, _ = current_image(stack)
    raise SystemExit(f"FAILED: the Deployment still runs {image}, not {digest}, after {DEADLINE_S:.0f} s")


def push_and_wait(stack: LocalStack, path: str) -> Step:
    assert stack.registry is not None
    before, _ = current_image(stack)
    digest = push_image(stack.registry.url, "demo/web", "stable")
    started = time.monotonic()  # the push has completed: the registry serves the new digest
    after, annotations, elapsed = wait_for_digest(stack, digest, started)
    return Step(path, before, after, digest, elapsed, annotations)


def report(step: Step) -> None:
    print(f"\n== {step.path}")
    print(f"   before : {step.before}")
    print(f"   after  : {step.after}")
    print(f"   push -> patch: {step.push_to_patch_s * 1000:.0f} ms")
    print(f"   pod-template annotations: {json.dumps(step.annotations, sort_keys=True)}")


@dataclass
class Results:
    steps: list[Step]
    rollback: Rollback
    channel: Channel
    approval: Approval
    gitops: GitOps


def run(poll_interval: float = 1.0) -> Results:
    steps: list[Step] = []
    options = StackOptions(
        notifications=True,
        poll_interval=None,
        clusters=["stage", "prod"],
        rollout=ROLLOUT,
        rollout_delay=0.3,
        log_level="CRITICAL",  # the rollback logs errors on purpose; the demo prints what happened
        git_write_back=True,  # the write-back queue and function (template.yaml's GitWriteBack=enabled)
    )
    with GitServer() as git, LocalStack(options) as stack:
        assert stack.registry is not None
        # its endpoints, not its secrets (the console's token: the demo signs in by itself)
        print("tagpin local stack:", json.dumps(LocalEndpoints.model_validate(stack.endpoints()).public()))
        image = f"{stack.registry.host}/demo/web:stable"
        stack.kube.create(deployment("web", "default", image, container="web", replicas=3))
        print(f"\nDeployment default/web runs {image}")
        steps.append(push_and_wait(stack, "first image pushed; tagpin pins the tag's digest (webhook)"))
        report(steps[-1])
        steps.append(push_and_wait(stack, "new image under the same tag, webhook path"))
        report(steps[-1])

        stack.set_notifications(False)
        stack.set_polling(poll_interval)
        steps.append(
            push_and_wait(stack, f"new image, notifications off, scheduled poller every {poll_interval:g} s")
        )
        report(steps[-1])
        rolled_back = rollback_scenario(stack)
        channel = versions_scenario(stack)
        approval = approval_scenario(stack)
        gitops = gitops_scenario(stack, git)
        history = stack.functions["consumer"].invocations
        print(f"\nconsumer invocations: {history}; consumer errors: {len(stack.consumer_errors)}")
        errors = stack.consumer_errors + stack.writeback_errors
        if errors:
            raise SystemExit("FAILED: consumer or write-back errors: " + "; ".join(errors))
    return Results(steps, rolled_back, channel, approval, gitops)


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    summary = figures(run())
    if "--json" in args:
        print(json.dumps(summary))
    print(
        "\nOK: both paths rolled the Deployment; the bad push was rolled back in stage; the version "
        "channel took prod from 1.0.0 straight to 1.3.0; 1.4.0 waited for approval and rolled to prod "
        "once approved in the console; the Argo-owned Deployment was moved by a commit the syncer applied.",
        json.dumps(summary),
    )
    return 0


def figures(results: Results) -> dict[str, Any]:
    """The demo's figures: push to patch, push to verified, the channel's versions in prod, push to
    commit and to the synced workload."""
    steps, rolled_back, channel, approval = results.steps, results.rollback, results.channel, results.approval
    return {
        "webhook_push_to_patch_ms": round(steps[1].push_to_patch_s * 1000),
        "poll_push_to_patch_ms": round(steps[2].push_to_patch_s * 1000),
        "push_to_verified_stage_ms": round(rolled_back.push_to_verified_s["stage"] * 1000),
        "push_to_verified_prod_ms": round(rolled_back.push_to_verified_s["prod"] * 1000),
        "version_channel_prod": " -> ".join(channel.prod),
        "approval_to_prod_verified_ms": round(approval.approval_to_prod_s * 1000),
        "gitops_push_to_commit_ms": round(results.gitops.push_to_commit_s * 1000),
        "gitops_push_to_running_ms": round(results.gitops.push_to_running_s * 1000),
    }


def document(results: Results) -> dict[str, Any]:
    """``tagpin demo --json``'s document: the figures (``summary``) and every step's results."""
    return {
        "summary": figures(results),
        "steps": [asdict(step) for step in results.steps],
        "rollback": asdict(results.rollback),
        "channel": asdict(results.channel),
        "approval": asdict(results.approval),
        "gitops": asdict(results.gitops),
    }


if __name__ == "__main__":
    raise SystemExit(main())
