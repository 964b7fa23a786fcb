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

Prints the image before and after each step, the time from push to patch, and from push to
verified. Exits non-zero if a step does not happen within its deadline.
"""

from __future__ import annotations

import html
import json
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.ports.state import TargetStatus

from tagpin_local.endpoints import LocalEndpoints
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

DEADLINE_S = 30.0
SOAK_S = 3
ROLLOUT = {
    "verify_interval_seconds": 1,
    "verify_timeout_seconds": 30,
    "soak_seconds": SOAK_S,
    "waves": [{"name": "stage", "clusters": ["local", "stage"]}, {"name": "prod", "clusters": ["prod"]}],
}
SHOP = ("stage/shop/Deployment/shop/shop", "prod/shop/Deployment/shop/shop")


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
class Rollback:
    good_digest: str
    bad_digest: str
    push_to_verified_s: dict[str, float]  # the good image, per wave
    stage_before: str
    stage_after: str
    prod_after: str
    stage_status: str
    notifications: list[dict[str, Any]]


def _shop_image(stack: LocalStack, cluster: str) -> str:
    image: str = stack.kubes[cluster].get("Deployment", "shop", "shop")["spec"]["template"]["spec"][
        "containers"
    ][0]["image"]
    return image


def _wait(what: str, condition: Any) -> float:
    started = time.monotonic()
    while time.monotonic() - started < DEADLINE_S:
        if condition():
            return time.monotonic() - started
        time.sleep(0.02)
    raise SystemExit(f"FAILED: {what} did not happen within {DEADLINE_S:.0f} s")


def rollback_scenario(stack: LocalStack) -> Rollback:
    """A good push through both waves, then a bad push rolled back in stage, prod untouched."""
    assert stack.registry is not None
    state = dynamodb_state(stack.client("dynamodb"), "tagpin-state")
    image = f"{stack.registry.host}/demo/shop:stable"
    for cluster in ("stage", "prod"):
        # a rollout that cannot progress fails after 10 s (the deployment controller's deadline)
        shop = deployment("shop", "shop", image, container="shop", replicas=3, progress_deadline=10)
        stack.kubes[cluster].create(shop)
    targets = [
        {"cluster": c, "namespace": "shop", "kind": "Deployment", "name": "shop", "container": "shop"}
        for c in ("stage", "prod")
    ]
    stack.options.images = [{"image": image, "targets": targets}]
    stack.write_config()

    def status(target: str, digest: str) -> TargetStatus | None:
        st = state.targets.get(target)
        return st.status if st is not None and st.digest == digest else None

    print(
        f"\n== safe rollout: Deployment shop/shop runs {image} in clusters stage (wave 1) and prod (wave 2)"
    )
    good = push_image(stack.registry.url, "demo/shop", "stable")
    started = time.monotonic()
    timings = {}
    for wave, target in zip(("stage", "prod"), SHOP, strict=True):
        _wait(f"{wave} verified", lambda t=target: status(t, good) is TargetStatus.VERIFIED)
        timings[wave] = time.monotonic() - started
    print(f"   good image {good[:19]}…: verified in stage after {timings['stage']:.1f} s,")
    print(f"   then (soak {SOAK_S} s) in prod after {timings['prod']:.1f} s (push -> verified)")
    stack.notifications()

    stage_before = _shop_image(stack, "stage")
    bad = push_image(stack.registry.url, "demo/shop", "stable")
    for cluster in ("stage", "prod"):  # its pods would never become available anywhere
        stack.kubes[cluster].break_image(bad)
    print(f"   broken image {bad[:19]}… pushed (its pods never become available)")
    elapsed = _wait("the rollback in stage", lambda: status(SHOP[0], bad) is TargetStatus.ROLLED_BACK)
    time.sleep(SOAK_S + 1)  # long enough for prod to have been promoted, had stage been verified
    result = Rollback(
        good_digest=good,
        bad_digest=bad,
        push_to_verified_s=timings,
        stage_before=stage_before,
        stage_after=_shop_image(stack, "stage"),
        prod_after=_shop_image(stack, "prod"),
        stage_status=str(state.targets.get(SHOP[0]).status),  # type: ignore[union-attr]
        notifications=[n for n in stack.notifications() if n["digest"] == bad],
    )
    detail = next((h.detail or "" for h in state.history.of_target(SHOP[0]) if h.status == "failed"), "")
    print(f"   stage: failed ({detail[:90]}), rolled back after {elapsed:.1f} s")
    print(f"   stage before : {result.stage_before}")
    print(f"   stage after  : {result.stage_after}")
    print(f"   prod         : {result.prod_after} (untouched)")
    tag = state.tags.get(image)
    print(f"   tag marked bad: {tag is not None and tag.blocked}; promotion halted in wave stage")
    for n in result.notifications:
        print(f"   notification (SNS): {n['event']:<11} wave {n['wave']:<5} {', '.join(n['targets'])}")
    return result


@dataclass
class Channel:
    versions: dict[str, str]  # tag -> digest, in the order pushed
    stage: list[str]  # the versions stage ran, in order
    prod: list[str]  # the versions prod ran, in order
    push_to_prod_s: float  # the last version's push -> verified in prod


VERSION_SOAK_S = 8  # long enough for the next version to arrive while one soaks in stage


def versions_scenario(stack: LocalStack) -> Channel:
    """A version channel (``^1``) promoted from stage to prod: stage takes 1.1.0, 1.2.0 and 1.3.0
    as they are pushed, each superseding the one soaking before it; prod goes 1.0.0 -> 1.3.0."""
    assert stack.registry is not None
    state = dynamodb_state(stack.client("dynamodb"), "tagpin-state")
    repository = f"{stack.registry.host}/demo/app"
    for cluster in ("stage", "prod"):
        stack.kubes[cluster].create(deployment("app", "app", f"{repository}:0.9.0", container="app"))
    targets = [
        {"cluster": c, "namespace": "app", "name": "app", "container": "app"} for c in ("stage", "prod")
    ]
    stack.options.images = [{"image": repository, "channel": "stable", "policy": "^1", "targets": targets}]
    stack.options.rollout = {**ROLLOUT, "soak_seconds": VERSION_SOAK_S}
    stack.write_config()
    stack.set_notifications(True)
    print(f"\n== version channel {repository}@stable (policy ^1): stage then prod, soak {VERSION_SOAK_S} s")
    stage_id, prod_id = (f"{c}/app/Deployment/app/app" for c in ("stage", "prod"))

    def runs(cluster: str, digest: str) -> bool:
        return str(_app_image(stack, cluster)).endswith("@" + digest)

    def verified(target: str, digest: str) -> bool:
        st = state.targets.get(target)
        return st is not None and st.digest == digest and st.status is TargetStatus.VERIFIED

    versions: dict[str, str] = {}
    versions["1.0.0"] = push_image(stack.registry.url, "demo/app", "1.0.0")
    _wait("1.0.0 verified in prod", lambda: verified(prod_id, versions["1.0.0"]))
    print(f"   1.0.0 pushed: stage and prod run {_app_image(stack, 'prod')}")
    for tag in ("1.1.0", "1.2.0", "1.3.0"):
        versions[tag] = push_image(stack.registry.url, "demo/app", tag)
        started = time.monotonic()
        elapsed = _wait(f"{tag} in stage", lambda t=tag: runs("stage", versions[t]))
        prod_now = _app_image(stack, "prod").rsplit("@")[0]
        print(f"   {tag} pushed: stage runs it after {elapsed:.1f} s; prod still runs {prod_now}")
    _wait("1.3.0 verified in prod", lambda: verified(prod_id, versions["1.3.0"]))
    push_to_prod = time.monotonic() - started
    by_digest = {d: t for t, d in versions.items()}

    def ran(target: str) -> list[str]:
        seen: list[str] = []
        for h in reversed(state.history.of_target(target)):
            tag = by_digest.get(h.digest or "")
            if h.status == "applied" and tag is not None and (not seen or seen[-1] != tag):
                seen.append(tag)
        return seen

    result = Channel(versions, ran(stage_id), ran(prod_id), push_to_prod)
    print(f"   stage ran: {' -> '.join(result.stage)}")
    print(
        f"   prod ran : {' -> '.join(result.prod)} (1.3.0 verified in stage, soaked and promoted "
        f"{push_to_prod:.1f} s after its push)"
    )
    return result


def _app_image(stack: LocalStack, cluster: str) -> str:
    image: str = stack.kubes[cluster].get("Deployment", "app", "app")["spec"]["template"]["spec"][
        "containers"
    ][0]["image"]
    return image


@dataclass
class Approval:
    image: str  # the version channel's key, as the console lists it
    version: str
    digest: str
    waited: bool  # the promotion awaited approval with prod still on the previous version
    prod_while_waiting: str
    approve_status: int  # the console's answer to the Approve form (303)
    approve_location: str
    approved: list[str]  # the details of the image's `approved` events
    prod_after: str
    approval_to_prod_s: float


def _console_approve(stack: LocalStack, image: str) -> tuple[dict[str, str], httpx.Response]:
    """Approve ``image``'s pending wave as a person does in the console: sign in with the local
    token, read the Approve form of the image's row on the overview, POST it (with the CSRF token)."""
    base = stack.console_url.removesuffix("/console")
    with httpx.Client(base_url=base, timeout=10) as console:
        signin = console.post("/console/signin", data={"token": stack.console_token})
        if signin.status_code != 303 or "tagpin_session" not in console.cookies:
            raise SystemExit(f"FAILED: the console's sign-in answered {signin.status_code}")
        overview = console.get("/console")
        row = re.search(
            r'<tr data-approval="' + re.escape(html.escape(image)) + r'">(.*?)</tr>', overview.text, re.S
        )
        if overview.status_code != 200 or row is None:
            raise SystemExit(f"FAILED: the console's overview does not list {image} as pending approval")
        form = re.search(r'<form[^>]*action="/console/actions/approve">(.*?)</form>', row.group(1), re.S)
        if form is None:
            raise SystemExit(f"FAILED: no Approve button for {image} on the console's overview")
        fields = {
            name: html.unescape(value)
            for name, value in re.findall(
                r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form.group(1)
            )
        }
        cells = re.findall(r"<td>([^<]*)</td>", row.group(1))
        wave = html.unescape(cells[0]) if cells else "?"
        print(f"   console: signed in with the local token; the overview lists {fields['image']}")
        print(
            f"            as pending approval: wave {wave}, digest {fields['digest'][:19]}…, Approve / Reject"
        )
        approved = console.post(
            "/console/actions/approve",
            data={"image": fields["image"], "digest": fields["digest"], "csrf": fields["csrf"]},
        )
    return fields, approved


def approval_scenario(stack: LocalStack) -> Approval:
    """The version channel's prod wave now needs a person's approval: 1.4.0 rolls in stage, soaks,
    then waits (prod unchanged) until it is approved through the console's Approve action."""
    assert stack.registry is not None
    state = dynamodb_state(stack.client("dynamodb"), "tagpin-state")
    repository = f"{stack.registry.host}/demo/app"
    image = f"{repository}@stable"  # the channel's key: the console's row, the history
    waves = [
        {"name": "stage", "clusters": ["local", "stage"]},
        {"name": "prod", "clusters": ["prod"], "approval": True},
    ]
    stack.options.rollout = {**ROLLOUT, "waves": waves}
    stack.write_config()
    print(f"\n== approval: the prod wave of {image} now waits for a person (approval: true), soak {SOAK_S} s")
    stage_id, prod_id = (f"{c}/app/Deployment/app/app" for c in ("stage", "prod"))
    prod_before = _app_image(stack, "prod")
    stack.notifications()  # only this step's from here on
    version = "1.4.0"
    digest = push_image(stack.registry.url, "demo/app", version)
    started = time.monotonic()

    def verified(target: str) -> bool:
        st = state.targets.get(target)
        return st is not None and st.digest == digest and st.status is TargetStatus.VERIFIED

    def awaiting() -> bool:
        promotion = state.promotions.get(image)
        return promotion is not None and promotion.digest == digest and promotion.awaiting_approval

    _wait(f"{version} verified in stage", lambda: verified(stage_id))
    print(f"   {version} pushed: verified in stage after {time.monotonic() - started:.1f} s")
    _wait(f"{version} awaiting approval for prod", awaiting)
    time.sleep(1.0)  # a moment more: nothing rolls in prod while the request waits
    prod_waiting = _app_image(stack, "prod")
    waited = awaiting() and prod_waiting == prod_before and not prod_waiting.endswith("@" + digest)
    print(
        f"   soaked {SOAK_S} s, then the promotion waits: awaiting_approval in wave prod "
        f"({time.monotonic() - started:.1f} s after the push)"
    )
    if not waited:
        raise SystemExit(f"FAILED: prod did not wait for approval: it runs {prod_waiting}")
    print(f"   prod still runs {prod_waiting} (not rolled)")
    for n in stack.notifications():
        if n.get("event") == "awaiting_approval":
            print(f"   notification (SNS): {n['event']} wave {n['wave']}")
    fields, answer = _console_approve(stack, image)
    location = answer.headers.get("location", "")
    print(f"   POST /console/actions/approve (session cookie, CSRF token) -> {answer.status_code} {location}")
    if answer.status_code != 303 or "notice=approved" not in location or fields["digest"] != digest:
        raise SystemExit(f"FAILED: the console's Approve answered {answer.status_code} {location}")
    approved_at = time.monotonic()
    _wait(f"{version} verified in prod", lambda: verified(prod_id))
    elapsed = time.monotonic() - approved_at
    details = [h.detail or "" for h in state.history.of_image(image) if h.event == "approved"]
    result = Approval(
        image=image,
        version=version,
        digest=digest,
        waited=waited,
        prod_while_waiting=prod_waiting,
        approve_status=answer.status_code,
        approve_location=location,
        approved=details,
        prod_after=_app_image(stack, "prod"),
        approval_to_prod_s=elapsed,
    )
    print(f"   history: {'; '.join(details)}")
    print(f"   prod now runs {result.prod_after} (verified {elapsed:.1f} s after the approval)")
    return result


def run(poll_interval: float = 1.0) -> tuple[list[Step], Rollback, Channel, Approval]:
    steps: list[Step] = []
    options = StackOptions(
        notifications=True,
        poll_interval=None,
        clusters=["stage", "prod"],
        rollout=ROLLOUT,
        rollout_delay=0.3,
        log_level="CRITICAL",  # the rollback logs errors on purpose; the demo prints what happened
    )
    with LocalStack(options) as stack:
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
        history = stack.functions["consumer"].invocations
        print(f"\nconsumer invocations: {history}; consumer errors: {len(stack.consumer_errors)}")
        if stack.consumer_errors:
            raise SystemExit("FAILED: consumer errors: " + "; ".join(stack.consumer_errors))
    return steps, rolled_back, channel, approval


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    summary = figures(*run())
    if "--json" in args:
        print(json.dumps(summary))
    print(
        "\nOK: both paths rolled the Deployment; the bad push was rolled back in stage; the version "
        "channel took prod from 1.0.0 straight to 1.3.0; 1.4.0 waited for approval and rolled to prod "
        "once approved in the console.",
        json.dumps(summary),
    )
    return 0


def figures(steps: list[Step], rolled_back: Rollback, channel: Channel, approval: Approval) -> dict[str, Any]:
    """The demo's figures: push to patch, push to verified, the channel's versions in prod."""
    return {
        "webhook_push_to_patch_ms": round(steps[1].push_to_patch_s * 1000),
        "poll_push_to_patch_ms": round(steps[2].push_to_patch_s * 1000),
        "push_to_verified_stage_ms": round(rolled_back.push_to_verified_s["stage"] * 1000),
        "push_to_verified_prod_ms": round(rolled_back.push_to_verified_s["prod"] * 1000),
        "version_channel_prod": " -> ".join(channel.prod),
        "approval_to_prod_verified_ms": round(approval.approval_to_prod_s * 1000),
    }


if __name__ == "__main__":
    raise SystemExit(main())
