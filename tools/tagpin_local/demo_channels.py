"""The demo's version channel and approval (:mod:`tagpin_local.demo`, steps 5 and 6):
``demo/app@stable`` promoted from stage to prod, then the prod wave waiting for a person's
approval, given through the console."""

from __future__ import annotations

import html
import re
import time
from dataclasses import dataclass

import httpx
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.channels import FollowedKey
from tagpin.ports.state import TargetStatus

from tagpin_local.demo_common import ROLLOUT, SOAK_S, wait
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack


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
    wait("1.0.0 verified in prod", lambda: verified(prod_id, versions["1.0.0"]))
    print(f"   1.0.0 pushed: stage and prod run {_app_image(stack, 'prod')}")
    for tag in ("1.1.0", "1.2.0", "1.3.0"):
        versions[tag] = push_image(stack.registry.url, "demo/app", tag)
        started = time.monotonic()
        elapsed = wait(f"{tag} in stage", lambda t=tag: runs("stage", versions[t]))
        prod_now = _app_image(stack, "prod").rsplit("@")[0]
        print(f"   {tag} pushed: stage runs it after {elapsed:.1f} s; prod still runs {prod_now}")
    wait("1.3.0 verified in prod", lambda: verified(prod_id, versions["1.3.0"]))
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
    # A person's browser waits as long as the console's own timeout (15 s locally, as in the
    # template) and more: 10 s failed a full test run on 2 busy cores (ReadTimeout on sign-in or
    # the overview, the console container's first call), so the demo waits 60 s.
    with httpx.Client(base_url=base, timeout=60) as console:
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
        promotion = state.promotions.get(FollowedKey(image))
        return promotion is not None and promotion.digest == digest and promotion.awaiting_approval

    wait(f"{version} verified in stage", lambda: verified(stage_id))
    print(f"   {version} pushed: verified in stage after {time.monotonic() - started:.1f} s")
    wait(f"{version} awaiting approval for prod", awaiting)
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
    wait(f"{version} verified in prod", lambda: verified(prod_id))
    elapsed = time.monotonic() - approved_at
    details = [h.detail or "" for h in state.history.of_image(FollowedKey(image)) if h.event == "approved"]
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
