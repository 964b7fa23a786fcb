"""The signature gate end to end: the real handlers on the local stack, signatures made here (keys
generated in the test, an AWS KMS key in moto) and pushed to the real registry the way cosign
pushes them.

An image whose gate is ``require`` (its key in the stack's secret store, and a KMS key): an
unsigned push is blocked and the workload untouched (recorded, announced once, shown by plan); a
forged signature (cosign's format, another key) is blocked; the signed push that follows rolls, in
either storage scheme (the ``.sig`` tag; a Sigstore bundle as an OCI 1.1 referrer, listed in the
referrers tag schema since this registry lacks the API); a digest signed after its push rolls at the
next reconcile. An image whose wave's gate is ``warn`` rolls an unsigned digest and records why.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin.ports.state import TargetStatus
from tagpin_cli import commands
from tagpin_local.cosign import Signer, attach_bundle, fetch_manifest, key_bundle, sign_image
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.iam import Call
from tests.support.iamroles import denied
from tests.support.iamsession import RECORDER
from tests.support.stack import running, state_of
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

SIGNED, WARNED = "prod/app/Deployment/signed/app", "prod/app/Deployment/warned/app"
KEY_SECRET = "tagpin/signing/release"


class KmsSigner:
    """``cosign sign --key awskms:///<arn>``: the signature made by KMS (ECDSA P-256, SHA-256)."""

    def __init__(self, kms: Any, key: str) -> None:
        self.kms, self.key = kms, key

    def sign(self, data: bytes) -> bytes:
        answer = self.kms.sign(
            KeyId=self.key, Message=data, MessageType="RAW", SigningAlgorithm="ECDSA_SHA_256"
        )
        return bytes(answer["Signature"])


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer.generate("ecdsa-p256")


@pytest.fixture(scope="module")
def calls() -> Iterator[list[Call]]:
    """The functions' AWS calls in this module: evaluated apart (the last test), with the template
    parameter a KMS signing key needs (``SigningKmsKeyArns``)."""
    with RECORDER.capture() as sink:
        yield sink.calls


@pytest.fixture(scope="module")
def st(signer: Signer, calls: list[Call]) -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=False, poll_interval=None, consume=True, clusters=["prod"])
    with LocalStack(options) as stack:
        assert stack.registry is not None
        stack.put_secret(KEY_SECRET, signer.public_pem)
        kms = stack.client("kms")
        kms_key = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]
        host = stack.registry.host
        target = {"cluster": "prod", "namespace": "app", "container": "app"}
        for name in ("signed", "warned"):
            stack.kubes["prod"].create(deployment(name, "app", f"{host}/demo/{name}:stable", container="app"))
        stack.options.images = [
            {
                "image": f"{host}/demo/signed:stable",
                "signatures": {"mode": "require", "keys": [{"secret": KEY_SECRET}, {"kms": kms_key}]},
                "targets": [target | {"name": "signed"}],
            },
            {"image": f"{host}/demo/warned:stable", "targets": [target | {"name": "warned"}]},
        ]
        stack.options.rollout = {  # the wave's gate: for images without one of their own
            "waves": [
                {
                    "name": "prod",
                    "clusters": ["prod"],
                    "signatures": {"mode": "warn", "keys": [{"secret": KEY_SECRET}]},
                }
            ]
        }
        stack.write_config()
        yield stack


@pytest.fixture(scope="module")
def kms_signer(st: LocalStack) -> KmsSigner:
    """The KMS key the gate lists (its public key read with kms:GetPublicKey by the consumer)."""
    key = st.options.images[0]["signatures"]["keys"][1]["kms"]
    return KmsSigner(st.client("kms"), key)


def blocked(st: LocalStack, target: str, digest: str) -> list[str]:
    return [
        h.detail or ""
        for h in state_of(st).history.of_target(target)
        if h.status == "blocked" and h.digest == digest
    ]


def push(st: LocalStack, name: str, marker: str) -> str:
    assert st.registry is not None
    return push_image(st.registry.url, f"demo/{name}", "stable", content=marker.encode())


def test_an_unsigned_push_is_blocked_and_the_workload_untouched(st: LocalStack) -> None:
    before = running(st, SIGNED)
    unsigned = push(st, "signed", "unsigned")
    st.notifications()
    st.run_poller()
    wait_for("recorded blocked", lambda: blocked(st, SIGNED, unsigned))
    assert blocked(st, SIGNED, unsigned)[0].startswith("signature: unsigned")
    assert running(st, SIGNED) == before
    st.run_poller()  # again: still blocked, recorded and announced once
    time.sleep(1)
    assert len(blocked(st, SIGNED, unsigned)) == 1
    assert [n["event"] for n in st.notifications() if n["event"] == "blocked"] == ["blocked"]
    plan = {r["target"]: r for r in commands.plan()}
    assert plan[SIGNED]["action"] == "none"
    assert plan[SIGNED]["detail"].startswith("blocked: signature: unsigned")


def test_a_forged_signature_is_blocked(st: LocalStack) -> None:
    assert st.registry is not None
    before = running(st, SIGNED)
    forged = push(st, "signed", "forged")
    sign_image(
        st.registry.url, "demo/signed", forged, Signer.generate("ecdsa-p256")
    )  # right format, other key
    st.run_poller()
    wait_for("recorded blocked", lambda: blocked(st, SIGNED, forged))
    assert blocked(st, SIGNED, forged)[0].startswith("signature: wrong-key")
    assert running(st, SIGNED) == before


def test_the_signed_push_that_follows_rolls_in_either_scheme(
    st: LocalStack, signer: Signer, kms_signer: KmsSigner
) -> None:
    assert st.registry is not None
    tagged = push(st, "signed", "signed with the .sig tag")
    sign_image(st.registry.url, "demo/signed", tagged, signer)
    st.run_poller()
    wait_for("the cosign-signed digest rolls", lambda: running(st, SIGNED).endswith("@" + tagged))

    bundled = push(st, "signed", "signed in a bundle")
    manifest = fetch_manifest(st.registry.url, "demo/signed", bundled)
    attach_bundle(st.registry.url, "demo/signed", bundled, key_bundle(signer, bundled, manifest=manifest))
    st.run_poller()
    wait_for("the bundle-signed digest rolls", lambda: running(st, SIGNED).endswith("@" + bundled))

    by_kms = push(st, "signed", "signed by the KMS key")
    sign_image(st.registry.url, "demo/signed", by_kms, kms_signer)  # type: ignore[arg-type]
    st.run_poller()
    wait_for("the KMS-signed digest rolls", lambda: running(st, SIGNED).endswith("@" + by_kms))

    def recorded() -> bool:
        target = state_of(st).targets.get(SIGNED)
        return target is not None and target.digest == by_kms and target.status is TargetStatus.VERIFIED

    wait_for("recorded verified", recorded)


def test_a_digest_signed_after_its_push_rolls_at_the_next_reconcile(st: LocalStack, signer: Signer) -> None:
    assert st.registry is not None
    late = push(st, "signed", "signed late")
    st.run_poller()
    wait_for("blocked while unsigned", lambda: blocked(st, SIGNED, late))
    sign_image(st.registry.url, "demo/signed", late, signer)
    st.run_reconciler()
    wait_for("rolled once signed", lambda: running(st, SIGNED).endswith("@" + late))


def test_a_warn_gate_rolls_an_unsigned_digest_and_records_why(st: LocalStack) -> None:
    unsigned = push(st, "warned", "unsigned, warned")
    st.run_poller()
    wait_for("rolled", lambda: running(st, WARNED).endswith("@" + unsigned))
    assert st.registry is not None
    history = state_of(st).history.of_image(f"{st.registry.host}/demo/warned:stable")
    events = [e for e in history if e.digest == unsigned]
    unverified = [e for e in events if e.event == "unverified"]
    assert len(unverified) == 1 and "signature: unsigned" in (unverified[0].detail or "")
    assert not blocked(st, WARNED, unsigned)


def test_the_consumer_reads_the_keys_as_its_role_allows(
    st: LocalStack, calls: list[Call], kms_signer: KmsSigner
) -> None:
    """The key in the secret store (ssm:GetParameter on /tagpin/signing/*) and the KMS key's public
    half (kms:GetPublicKey, granted on SigningKmsKeyArns only). A digest signed by the KMS key rolls
    first, so the keys are read whatever the order the tests run in (the calls are the module's)."""
    assert st.registry is not None
    by_kms = push(st, "signed", "signed by the KMS key, for the role's proof")
    sign_image(st.registry.url, "demo/signed", by_kms, kms_signer)  # type: ignore[arg-type]
    st.run_poller()
    wait_for("the KMS-signed digest rolls", lambda: running(st, SIGNED).endswith("@" + by_kms))
    consumer = {r.action for c in calls if c.function == "consumer" for r in c.requests}
    assert {"kms:GetPublicKey", "ssm:GetParameter"} <= consumer
    assert denied(calls, {"SigningKmsKeyArns": kms_signer.key}) == []
    assert any("kms:GetPublicKey" in problem for problem in denied(calls))  # not granted by default
