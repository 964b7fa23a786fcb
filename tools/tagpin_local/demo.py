"""``make demo``: a moved tag becomes a rolled Deployment, through both paths, on 127.0.0.1.

1. A Deployment runs ``<registry>/demo/web:stable``; the first image is pushed and tagpin pins it.
2. Webhook path: a new image is pushed under the same tag; the registry's real push notification
   reaches the webhook handler, which re-resolves the tag and enqueues; the consumer patches.
3. Scheduled path: notifications switched off, polling on; another push; the poller notices.

Prints the image before and after each step and the time from push to patch. Exits non-zero if a
step does not happen within its deadline.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from tagpin_local.kubesim import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

DEADLINE_S = 30.0


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


def run(poll_interval: float = 1.0) -> list[Step]:
    steps: list[Step] = []
    with LocalStack(StackOptions(notifications=True, poll_interval=None)) as stack:
        assert stack.registry is not None
        print("tagpin local stack:", json.dumps(stack.endpoints()))
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
        history = stack.functions["consumer"].invocations
        print(f"\nconsumer invocations: {history}; consumer errors: {len(stack.consumer_errors)}")
        if stack.consumer_errors:
            raise SystemExit("FAILED: consumer errors: " + "; ".join(stack.consumer_errors))
    return steps


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    steps = run()
    summary: dict[str, Any] = {
        "webhook_push_to_patch_ms": round(steps[1].push_to_patch_s * 1000),
        "poll_push_to_patch_ms": round(steps[2].push_to_patch_s * 1000),
    }
    if "--json" in args:
        print(json.dumps(summary))
    print("\nOK: both paths rolled the Deployment.", json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
