"""Trust gates, admission's platform and signature gates: the platform check (an index must provide
every platform its cluster's nodes run; the configured platforms decide when the nodes may not be
listed), the signature gate (a verdict per failure reason, warn against require, the image's gate
before the wave's, keys from where they are kept), and a blocked digest through the Applier (not
patched, recorded and announced once, a transient refusal tried again)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tagpin.domain.config import (
    Cluster,
    ConfigError,
    RolloutSettings,
    Signatures,
    Target,
    parse_config,
    signatures_for,
)
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.domain.platforms import Platform, index_platforms, missing
from tagpin.domain.refs import ImageRef
from tagpin.domain.signatures import SignatureMode
from tagpin.ports.registry import OCI_INDEX, RegistryUnavailable
from tagpin.ports.signatures import SignaturePolicy, SignatureProblem, SignatureVerdict, TrustMaterialError
from tagpin.ports.state import State
from tagpin.usecases.admission import Decision, GateName, Known, Verdict, standard
from tagpin.usecases.admission.platform import PlatformGate
from tagpin.usecases.admission.signature import SignatureGate, signatures_of
from tagpin.usecases.apply import Applier

from tests.support.clock import FakeClock
from tests.support.cluster import FakeClusters
from tests.support.constants import D1, WEB, WEB_TARGET
from tests.support.registry import ScriptedRegistry
from tests.unit.test_rollout import ROLLOUT_CONFIG, change, clusters  # noqa: F401 (fixture)

AMD, ARM = Platform("linux", "amd64"), Platform("linux", "arm64")


def index(*platforms: str, attestation: bool = True) -> bytes:
    manifests = [
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": f"sha256:{i:064x}",
            "size": 1,
            "platform": dict(zip(("os", "architecture", "variant"), p.split("/"), strict=False)),
        }
        for i, p in enumerate(platforms)
    ]
    if attestation:
        manifests.append(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + "f" * 64,
                "size": 1,
                "platform": {"os": "unknown", "architecture": "unknown"},
            }
        )
    document = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("text", "platform"),
    [
        ("linux/amd64", AMD),
        ("linux/arm64/v8", ARM),
        ("LINUX/ARM64", ARM),
        ("linux/arm/v7", Platform("linux", "arm", "v7")),
    ],
)
def test_platforms_parse_and_normalise(text: str, platform: Platform) -> None:
    assert Platform.parse(text) == platform


@pytest.mark.parametrize("text", ["linux", "linux/", "a/b/c/d", "linux/am d64", ""])
def test_not_a_platform(text: str) -> None:
    with pytest.raises(ValueError, match="not a platform"):
        Platform.parse(text)


def test_an_index_provides_its_entries_not_its_attestations() -> None:
    assert index_platforms(index("linux/amd64", "linux/arm64/v8")) == {AMD, ARM}
    assert index_platforms(b'{"schemaVersion": 2, "config": {}}') is None  # a single manifest
    assert missing([AMD, ARM], [AMD]) == [ARM]
    assert missing([Platform("linux", "arm", "v7")], [Platform("linux", "arm", "v6")]) == [
        Platform("linux", "arm", "v7")
    ]
    assert missing([Platform("linux", "arm")], [Platform("linux", "arm", "v7")]) == []  # no variant asked


def gate(
    registry: ScriptedRegistry, connector: FakeClusters, configured: dict[str, list[str]] | None = None
) -> PlatformGate:
    config = {
        name: Cluster(kubeconfig={"secret": f"tagpin/clusters/{name}"}, platforms=p)
        for name, p in (configured or {}).items()
    }
    return PlatformGate(registry, connector, lambda: config, FakeClock(0, step=1))


MOVE = Move(image=WEB, digest=D1, observed_at=1, trigger=Trigger.POLL)


def blocks(decision: Decision) -> bool:
    return decision.verdict is Verdict.BLOCK


def scripted(body: bytes, digest: str = D1) -> ScriptedRegistry:
    registry = ScriptedRegistry()
    registry.manifests[f"127.0.0.1:5000/demo/web@{digest}"] = (OCI_INDEX, body)
    return registry


def test_an_index_without_arm64_is_blocked_where_arm64_nodes_run(clusters: FakeClusters) -> None:  # noqa: F811
    clusters["dev"].node_platforms = frozenset({AMD, ARM})
    target = Target(cluster="dev", namespace="demo", name="web", container="web")
    blocked = gate(scripted(index("linux/amd64")), clusters).decide(MOVE, target, Known(), 0)
    assert blocks(blocked) and blocked.gate is GateName.PLATFORM and not blocked.transient
    assert "lacks linux/arm64, which the nodes of cluster dev run" in blocked.reason
    clusters["dev"].node_platforms = frozenset({AMD})  # an amd64-only cluster
    assert gate(scripted(index("linux/amd64")), clusters).decide(MOVE, target, Known(), 0).goes


def test_the_configured_platforms_decide_when_nodes_may_not_be_listed(clusters: FakeClusters) -> None:  # noqa: F811
    clusters["dev"].node_platforms = None
    target = Target(cluster="dev", namespace="demo", name="web", container="web")
    blocked = gate(scripted(index("linux/amd64")), clusters, {"dev": ["linux/arm64"]}).decide(
        MOVE, target, Known(), 0
    )
    assert blocks(blocked) and "the configuration of cluster dev" in blocked.reason
    assert (
        gate(scripted(index("linux/amd64")), clusters).decide(MOVE, target, Known(), 0).goes
    )  # unknown: not checked


def test_the_configured_platforms_decide_when_no_node_is_listed(clusters: FakeClusters) -> None:  # noqa: F811
    clusters["dev"].node_platforms = frozenset()  # nodes may be listed, but there are none
    target = Target(cluster="dev", namespace="demo", name="web", container="web")
    blocked = gate(scripted(index("linux/amd64")), clusters, {"dev": ["linux/arm64"]}).decide(
        MOVE, target, Known(), 0
    )
    assert (
        blocks(blocked) and "lacks linux/arm64, which the configuration of cluster dev runs" in blocked.reason
    )
    assert (
        gate(scripted(index("linux/amd64", "linux/arm64")), clusters, {"dev": ["linux/arm64"]})
        .decide(MOVE, target, Known(), 0)
        .goes
    )
    clusters["dev"].node_platforms = frozenset({AMD})  # listed nodes take precedence
    assert (
        gate(scripted(index("linux/amd64")), clusters, {"dev": ["linux/arm64"]})
        .decide(MOVE, target, Known(), 0)
        .goes
    )


def test_a_registry_that_cannot_answer_is_tried_again(clusters: FakeClusters) -> None:  # noqa: F811
    clusters["dev"].node_platforms = frozenset({ARM})
    registry = ScriptedRegistry()
    registry.down["127.0.0.1:5000"] = RegistryUnavailable("503", host="127.0.0.1:5000", status=503)
    target = Target(cluster="dev", namespace="demo", name="web", container="web")
    blocked = gate(registry, clusters).decide(MOVE, target, Known(), 0)
    assert blocks(blocked) and blocked.transient


def test_a_blocked_digest_is_not_patched_and_recorded_once(store: State, clusters: FakeClusters) -> None:  # noqa: F811
    clusters["dev"].node_platforms = frozenset({AMD, ARM})
    platform = gate(scripted(index("linux/amd64")), clusters)
    applier = Applier(
        followed=lambda: ROLLOUT_CONFIG.followed,
        state=store,
        workloads=clusters,
        clock=FakeClock(1_800_000_000_000, step=1_000),
        admission=standard(state=store, settings=RolloutSettings, platforms=platform),
    )
    (result,) = [r for r in applier.apply(change()) if r.target == WEB_TARGET]
    assert result.outcome is ApplyOutcome.BLOCKED and "lacks linux/arm64" in (result.detail or "")
    assert clusters["dev"].patches == []
    applier.apply(change())  # again (the next poll): still blocked, recorded once
    notes = [h for h in store.history.of_target(WEB_TARGET) if h.status == "blocked"]
    assert len(notes) == 1
    events = [e.event for e in store.history.of_image(WEB) if e.digest == D1]
    assert events.count("blocked") == 1


# -- signatures ----------------------------------------------------------------------------------

PEM = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"


class ScriptedChecker:
    """A SignatureChecker answering the verdicts given, in order (the last one again)."""

    def __init__(self, *verdicts: SignatureVerdict) -> None:
        self.verdicts = list(verdicts)
        self.asked: list[tuple[str, str]] = []

    def check(self, image: ImageRef, digest: str, policy: SignaturePolicy) -> SignatureVerdict:
        self.asked.append((str(image), digest))
        return self.verdicts.pop(0) if len(self.verdicts) > 1 else self.verdicts[0]


class FixedMaterial:
    def __init__(self, error: TrustMaterialError | None = None) -> None:
        self.error = error

    def policy(self, settings: Signatures) -> SignaturePolicy:
        if self.error is not None:
            raise self.error
        return SignaturePolicy(public_keys=tuple(k.pem or "" for k in settings.keys))


def signature_gate(
    checker: ScriptedChecker, material: FixedMaterial | None = None, settings: Any = None
) -> SignatureGate:
    fixed = material or FixedMaterial()
    return SignatureGate(lambda: checker, lambda: fixed, settings)


REQUIRE = Signatures(keys=[{"pem": PEM}])
WARN = Signatures(mode=SignatureMode.WARN, keys=[{"pem": PEM}])


@pytest.mark.parametrize("problem", [p for p in SignatureProblem if p is not SignatureProblem.UNAVAILABLE])
def test_each_reason_blocks_a_required_signature_with_that_reason(problem: SignatureProblem) -> None:
    checker = ScriptedChecker(SignatureVerdict(False, problem, "why"))
    blocked = signature_gate(checker).check(WEB, D1, REQUIRE)
    assert blocks(blocked) and blocked.gate is GateName.SIGNATURE
    assert blocked.reason == f"{problem}: why" and not blocked.transient
    assert checker.asked == [("127.0.0.1:5000/demo/web", D1)]  # the repository, without its tag


def test_a_registry_that_did_not_answer_is_a_transient_block() -> None:
    checker = ScriptedChecker(SignatureVerdict(False, SignatureProblem.UNAVAILABLE, "503"))
    blocked = signature_gate(checker).check(WEB, D1, REQUIRE)
    assert blocks(blocked) and blocked.transient


def test_warn_reports_without_enforcing() -> None:
    checker = ScriptedChecker(SignatureVerdict(False, SignatureProblem.UNSIGNED, "no signature found"))
    warned = signature_gate(checker).check(WEB, D1, WARN)
    assert warned.goes and warned.warn and warned.reason.startswith("unsigned")


def test_only_a_trusted_verdict_is_kept() -> None:
    checker = ScriptedChecker(
        SignatureVerdict(False, SignatureProblem.UNSIGNED),
        SignatureVerdict(True, signer="sha256:k"),
    )
    gate = signature_gate(checker)
    assert blocks(gate.check(WEB, D1, REQUIRE))  # unsigned: asked again next time
    assert gate.check(WEB, D1, REQUIRE).goes  # signed since
    assert gate.check(WEB, D1, REQUIRE).goes  # kept: not asked a third time
    assert len(checker.asked) == 2
    other = Signatures(keys=[{"pem": PEM.replace("MFkw", "MFkx")}])
    gate.check(WEB, D1, other)  # another gate's trust: asked
    assert len(checker.asked) == 3


@pytest.mark.parametrize("transient", [False, True])
def test_keys_that_cannot_be_read_block(transient: bool) -> None:
    material = FixedMaterial(TrustMaterialError("kms k: GetPublicKey failed (X)", transient=transient))
    checker = ScriptedChecker(SignatureVerdict(True))
    blocked = signature_gate(checker, material).check(WEB, D1, REQUIRE)
    assert blocks(blocked) and blocked.transient is transient and "GetPublicKey" in blocked.reason
    assert checker.asked == []


def test_the_image_gate_wins_over_the_wave_gate() -> None:
    config = parse_config(
        f"""
clusters: {{dev: {{kubeconfig: {{file: /dev/null}}}}, prod: {{kubeconfig: {{file: /dev/null}}}}}}
images:
  - image: 127.0.0.1:5000/demo/web:stable
    targets: [{{cluster: dev, name: web, container: app}}, {{cluster: prod, name: web, container: app}}]
  - image: 127.0.0.1:5000/demo/api:stable
    signatures: off
    targets: [{{cluster: prod, name: api, container: app}}]
rollout:
  waves:
    - {{name: dev, clusters: [dev]}}
    - name: prod
      clusters: [prod]
      signatures: {{mode: require, keys: [{{pem: {json.dumps(PEM)}}}]}}
"""
    )
    web, api = config.followed[WEB], config.followed["127.0.0.1:5000/demo/api:stable"]
    assert signatures_of(web, web.targets[0], config.rollout) is None  # the dev wave has none
    assert signatures_of(web, web.targets[1], config.rollout) == config.rollout.waves[1].signatures
    assert (
        signatures_of(api, api.targets[0], config.rollout) is None
    )  # the image says off: the wave cannot say more
    assert signatures_for(None, WARN) == WARN and signatures_for(REQUIRE, WARN) == REQUIRE


@pytest.mark.parametrize(
    ("document", "error"),
    [
        ("require", "give keys or identities"),
        ("{keys: [{pem: x}]}", "not a PEM public key"),
        ("{keys: [{secret: tagpin/clusters/x}]}", "tagpin/signing/<name>"),
        ("{identities: [{issuer: a, identity: b}]}", "need a trusted_root"),
        ("{keys: [{kms: k, secret: tagpin/signing/k}]}", "exactly one of pem, secret, kms"),
        (
            '{identities: [{issuer: a, identity: "(", match: regex}], trusted_root: {json: x}}',
            "not a regular",
        ),
        ("{mode: maybe, keys: [{kms: k}]}", "mode"),
        ("{identities: [{issuer: a, identity: b}], trusted_root: {}}", "exactly one of json, secret"),
        (
            "{identities: [{issuer: a, identity: b}], trusted_root: {json: x, secret: tagpin/signing/r}}",
            "exactly one of json, secret",
        ),
    ],
)
def test_a_gate_that_cannot_work_is_a_configuration_error(document: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        parse_config(
            "clusters: {dev: {kubeconfig: {file: /dev/null}}}\nimages:\n  - image: a.example/web:1\n"
            f"    signatures: {document}\n    targets: [{{cluster: dev, name: web, container: app}}]\n"
        )


def test_warn_through_the_applier_rolls_and_records_why_once(store: State, clusters: FakeClusters) -> None:  # noqa: F811
    config = parse_config(
        f"""
clusters: {{dev: {{kubeconfig: {{file: /dev/null}}}}}}
images:
  - image: {WEB}
    signatures: {{mode: warn, keys: [{{pem: {json.dumps(PEM)}}}]}}
    targets: [{{cluster: dev, namespace: demo, name: web, container: app}}]
"""
    )
    checker = ScriptedChecker(SignatureVerdict(False, SignatureProblem.WRONG_KEY, "signed by sha256:x"))
    applier = Applier(
        followed=lambda: config.followed,
        state=store,
        workloads=clusters,
        clock=FakeClock(1_800_000_000_000, step=1_000),
        admission=standard(state=store, settings=lambda: config.rollout, signatures=signature_gate(checker)),
    )
    (result,) = applier.apply(change())
    assert result.outcome is ApplyOutcome.PATCHED
    applier.apply(change())
    events = [e for e in store.history.of_image(WEB) if e.event == "unverified"]
    assert len(events) == 1 and "signature: wrong-key: signed by sha256:x" in (events[0].detail or "")


# -- keys from where they are kept ---------------------------------------------------------------


def test_keys_come_inline_from_the_secret_store_and_from_kms(aws: None) -> None:
    import boto3
    from tagpin.adapters.secrets import SecretNotFound
    from tagpin.adapters.signatures.material import StoredTrustMaterial
    from tagpin_local.cosign import Signer

    kms = boto3.client("kms")
    signing = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]
    encrypting = kms.create_key()["KeyMetadata"]["Arn"]
    inline, stored = Signer.generate("ed25519"), Signer.generate("ecdsa-p256")
    secrets = {"tagpin/signing/release": stored.public_pem}

    def secret_text(name: str) -> str:
        if name not in secrets:
            raise SecretNotFound(f"the SSM parameter /{name} does not exist")
        return secrets[name]

    material = StoredTrustMaterial(secret_text, lambda region: kms)
    gate = Signatures(
        keys=[{"pem": inline.public_pem}, {"secret": "tagpin/signing/release"}, {"kms": signing}]
    )
    policy = material.policy(gate)
    assert policy.public_keys[:2] == (inline.public_pem, stored.public_pem)
    assert policy.public_keys[2] == _der_to_pem(kms.get_public_key(KeyId=signing)["PublicKey"])

    def refused(keys: list[dict[str, str]]) -> TrustMaterialError:
        with pytest.raises(TrustMaterialError) as caught:
            material.policy(Signatures(keys=keys))
        return caught.value

    gone = refused([{"secret": "tagpin/signing/gone"}])
    assert "does not exist" in str(gone) and not gone.transient
    assert "not a signing key" in str(refused([{"kms": encrypting}]))
    missing_key = refused(
        [{"kms": signing.rsplit("/", 1)[0] + "/" + "0" * 8 + "-0000-0000-0000-" + "0" * 12}]
    )
    assert "NotFoundException" in str(missing_key) and not missing_key.transient
    secrets["tagpin/signing/rsa"] = _rsa_pem()
    assert "ECDSA P-256 or Ed25519" in str(refused([{"secret": "tagpin/signing/rsa"}]))


def _der_to_pem(der: bytes) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_der_public_key(der)
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def _rsa_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
