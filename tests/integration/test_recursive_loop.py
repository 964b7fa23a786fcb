"""Lambda's recursive loop detection against a rollout that takes long, on the local stack: the
real poller and consumer, the SQS loop, and Lambda's guard modelled by ``tagpin_local.recursion``
with each function's ``RecursiveLoop`` read from template.yaml.

Every look at a rollout in progress is a verification the consumer sends to its own queue, so a
rollout held at an Argo canary pause (a person promotes it when they are ready) is a chain of
consumer invocations as long as the pause. Lambda stops such a chain after 16 invocations unless the
function's ``RecursiveLoop`` is ``Allow``: the template sets it on the consumer, and the chain of
more than 30 verifications here goes on until the rollout is promoted and verified. With the
setting removed (``Terminate``, Lambda's default) the same rollout's chain stops at 16: the
verification is never handed to the consumer again, and a promotion nobody follows stays applied.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tagpin.ports.state import TargetStatus
from tagpin_local.kube.manifests import rollout
from tagpin_local.oci import push_image
from tagpin_local.recursion import MAX_INVOCATIONS, RecursiveLoop
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import target_status, wait_for

pytestmark = pytest.mark.integration

HOPS = 32  # consumer invocations in one chain: twice what Lambda lets through by default
# A pause is looked at every second for as long as a rollout may take (verify_timeout_seconds),
# then less and less often (tagpin.usecases.verify.pause_delay_s): 120 s keeps every look of this
# test a second apart.
ROLLOUT: dict[str, Any] = {"verify_interval_seconds": 1, "verify_timeout_seconds": 120, "waves": []}
PAUSE_STEPS = [{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}]
TARGET = "local/shop/Rollout/cart/app"


def _stack(recursive_loop: dict[str, RecursiveLoop] | None) -> LocalStack:
    return LocalStack(
        StackOptions(
            notifications=False,
            poll_interval=None,
            rollout=ROLLOUT,
            rollout_delay=0.2,
            recursive_loop=recursive_loop,
        )
    )


@pytest.fixture
def template_stack() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with _stack(None) as st:  # RecursiveLoop as template.yaml sets it
        yield st


@pytest.fixture
def terminating_stack() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with _stack({"consumer": RecursiveLoop.TERMINATE}) as st:  # the template's setting removed
        yield st


def _held_at_a_pause(st: LocalStack) -> str:
    """A Rollout followed by tagpin, a new digest pushed and polled: patched, then held at its
    canary pause step until promoted. The digest."""
    assert st.registry is not None
    image = f"{st.registry.host}/demo/cart:stable"
    target = {"cluster": "local", "namespace": "shop", "kind": "Rollout", "name": "cart", "container": "app"}
    st.options.images = [{"image": image, "targets": [target]}]
    st.write_config()
    st.kube.create(rollout("cart", "shop", "placeholder", steps=PAUSE_STEPS))
    digest = push_image(st.registry.url, "demo/cart", "stable")
    st.run_poller()
    wait_for(
        "the rollout held at its canary pause",
        lambda: st.kube.get("Rollout", "shop", "cart")["status"].get("phase") == "Paused",
    )
    return digest


def test_the_consumer_follows_a_rollout_through_more_than_16_verifications(
    template_stack: LocalStack,
) -> None:
    st = template_stack
    assert st.loops.setting("consumer") is RecursiveLoop.ALLOW  # read from template.yaml
    digest = _held_at_a_pause(st)
    wait_for(
        f"{HOPS} consumer invocations in the rollout's chain",
        lambda: st.loops.longest.get("consumer", 0) >= HOPS,
        deadline_s=180,
    )
    assert target_status(st, TARGET, digest) is TargetStatus.APPLIED  # still followed, not failed
    # each invocation of the chain looked at the Rollout (the apply, then one per verification):
    # the consumer ran them all, twice as many as Lambda's default lets through
    assert st.kube.count("GET", "/rollouts/cart$") >= 2 * MAX_INVOCATIONS
    st.kube.promote_rollout("shop", "cart")  # a person moves the canary on
    wait_for("verified once promoted", lambda: target_status(st, TARGET, digest) is TargetStatus.VERIFIED)
    assert st.loops.dropped == []


def test_without_the_setting_lambda_stops_the_chain_at_16(terminating_stack: LocalStack) -> None:
    st = terminating_stack
    digest = _held_at_a_pause(st)
    stopped = wait_for("the chain stopped", lambda: list(st.loops.dropped), deadline_s=120)
    assert st.loops.longest["consumer"] == MAX_INVOCATIONS == 16
    assert {d.function for d in stopped} == {"consumer"}
    assert {d.invocations for d in stopped} == {MAX_INVOCATIONS}
    # Promoted now, but nothing follows the rollout any more: the stopped verification comes back
    # (SQS delivers it again after its visibility timeout) and is stopped again.
    st.kube.promote_rollout("shop", "cart")
    seen = len(st.loops.dropped)
    wait_for("the verification stopped again", lambda: len(st.loops.dropped) > seen, deadline_s=60)
    assert target_status(st, TARGET, digest) is TargetStatus.APPLIED  # never verified
    assert st.loops.longest["consumer"] == MAX_INVOCATIONS
