"""The demo's safe rollout (:mod:`tagpin_local.demo`, step 4): a good image through both waves,
then a broken one rolled back in stage, prod untouched."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.channels import FollowedKey
from tagpin.ports.state import TargetStatus

from tagpin_local.demo_common import SHOP, SOAK_S, wait
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack


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
        wait(f"{wave} verified", lambda t=target: status(t, good) is TargetStatus.VERIFIED)
        timings[wave] = time.monotonic() - started
    print(f"   good image {good[:19]}…: verified in stage after {timings['stage']:.1f} s,")
    print(f"   then (soak {SOAK_S} s) in prod after {timings['prod']:.1f} s (push -> verified)")
    stack.notifications()

    stage_before = _shop_image(stack, "stage")
    bad = push_image(stack.registry.url, "demo/shop", "stable")
    for cluster in ("stage", "prod"):  # its pods would never become available anywhere
        stack.kubes[cluster].break_image(bad)
    print(f"   broken image {bad[:19]}… pushed (its pods never become available)")
    elapsed = wait("the rollback in stage", lambda: status(SHOP[0], bad) is TargetStatus.ROLLED_BACK)
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
    tag = state.tags.get(FollowedKey(image))
    print(f"   tag marked bad: {tag is not None and tag.blocked}; promotion halted in wave stage")
    for n in result.notifications:
        print(f"   notification (SNS): {n['event']:<11} wave {n['wave']:<5} {', '.join(n['targets'])}")
    return result
