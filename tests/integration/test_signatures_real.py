"""Signature verification against the real CNCF registry (Debian's docker-registry 2.8, 127.0.0.1).

Keys are made here (ECDSA P-256, Ed25519), signatures are made and pushed here the way cosign does
(``tagpin_local.cosign``: the ``sha256-<hex>.sig`` tag; Sigstore bundles as OCI 1.1 referrers), and
keyless bundles come from a Sigstore of the test's own (``tagpin_local.sigstore_local``). The checker
reads them through the production ``RegistryClient``. Registry 2.8 has no referrers API (404), so
bundles are found through the referrers tag schema; the API itself is served by ``ReferrersFront``,
a small HTTP front that answers ``/v2/<name>/referrers/<digest>`` and passes the rest to the registry.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import threading
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.resilience import RetryPolicy
from tagpin.adapters.signatures import RegistrySignatureChecker
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import OCI_INDEX, BlobNotFound, ContentTooLarge, RegistryAccess
from tagpin.ports.signatures import KeylessIdentity, SignaturePolicy, SignatureProblem, SignatureScheme
from tagpin_local.cosign import (
    BUNDLE_V03,
    Signer,
    attach_bundle,
    copy_signatures,
    fetch_manifest,
    key_bundle,
    referrers_tag,
    sign_image,
    signature_tag,
    simple_signing_payload,
)
from tagpin_local.oci import push_image
from tagpin_local.registry_server import RegistryServer, free_port
from tagpin_local.sigstore_local import LocalSigstore

from tests.conftest import require_binary

pytestmark = pytest.mark.integration
P = SignatureProblem
REPO = "team/app"
ISSUER = "https://token.actions.example.com"
WHO = "https://github.example.com/team/app/.github/workflows/release.yml@refs/heads/main"

EC = Signer.generate("ecdsa-p256")
ED = Signer.generate("ed25519")
STRANGER = Signer.generate("ecdsa-p256")
KEYS = SignaturePolicy(public_keys=(EC.public_pem, ED.public_pem))


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryServer]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with RegistryServer() as server:
        yield server


@pytest.fixture(scope="module")
def client() -> Iterator[RegistryClient]:
    with RegistryClient(lambda _registry: RegistryAccess(insecure=True)) as c:
        yield c


def checker(client: RegistryClient) -> RegistrySignatureChecker:
    return RegistrySignatureChecker(client)


def new_image(registry: RegistryServer, tag: str) -> tuple[ImageRef, str]:
    digest = push_image(registry.url, REPO, tag)
    return ImageRef(registry.host, REPO, tag), digest


# --- cosign's tag scheme ----------------------------------------------------------------------------


@pytest.mark.parametrize("signer", [EC, ED], ids=["ecdsa-p256", "ed25519"])
def test_cosign_signed_with_a_listed_key(
    registry: RegistryServer, client: RegistryClient, signer: Signer
) -> None:
    image, digest = new_image(registry, f"cosign-{id(signer)}")
    sign_image(registry.url, REPO, digest, signer)
    verdict = checker(client).check(image, digest, KEYS)
    assert verdict.ok, verdict.detail
    assert (verdict.scheme, verdict.signer) == (SignatureScheme.COSIGN_TAG, signer.key_id)


def test_unsigned(registry: RegistryServer, client: RegistryClient) -> None:
    image, digest = new_image(registry, "unsigned")
    verdict = checker(client).check(image, digest, KEYS)
    assert verdict.reason is P.UNSIGNED


def test_signed_by_a_key_not_in_the_list(registry: RegistryServer, client: RegistryClient) -> None:
    image, digest = new_image(registry, "stranger")
    sign_image(registry.url, REPO, digest, STRANGER)
    assert checker(client).check(image, digest, KEYS).reason is P.WRONG_KEY
    assert checker(client).check(image, digest, SignaturePolicy(public_keys=(STRANGER.public_pem,))).ok


def test_a_second_signature_is_appended_and_either_counts(
    registry: RegistryServer, client: RegistryClient
) -> None:
    image, digest = new_image(registry, "twice")
    sign_image(registry.url, REPO, digest, STRANGER)
    sign_image(registry.url, REPO, digest, ED)
    layers = json.loads(fetch_manifest(registry.url, REPO, signature_tag(digest)))["layers"]
    assert len(layers) == 2
    assert checker(client).check(image, digest, KEYS).signer == ED.key_id


def test_another_digests_signature_copied_under_this_digest(
    registry: RegistryServer, client: RegistryClient
) -> None:
    _signed, signed_digest = new_image(registry, "original")
    sign_image(registry.url, REPO, signed_digest, EC)
    image, digest = new_image(registry, "replayed")
    copy_signatures(registry.url, REPO, signed_digest, digest)
    verdict = checker(client).check(image, digest, KEYS)
    assert verdict.reason is P.DIGEST_MISMATCH, verdict.detail
    assert verdict.signer == EC.key_id  # a trusted key signed it: for another image


def test_a_payload_naming_another_digest(registry: RegistryServer, client: RegistryClient) -> None:
    _other, other_digest = new_image(registry, "other")
    image, digest = new_image(registry, "misnamed")
    payload = simple_signing_payload(f"{registry.host}/{REPO}", other_digest)
    sign_image(registry.url, REPO, digest, ED, payload=payload)
    assert checker(client).check(image, digest, KEYS).reason is P.DIGEST_MISMATCH


# --- Sigstore bundles as referrers (tag schema: registry 2.8 has no referrers API) -----------------


@pytest.mark.parametrize(
    ("signer", "dsse"),
    [(EC, False), (ED, False), (EC, True), (ED, True)],
    ids=["ecdsa-message", "ed25519-message", "ecdsa-dsse", "ed25519-dsse"],
)
def test_a_key_bundle_referrer(
    registry: RegistryServer, client: RegistryClient, signer: Signer, dsse: bool
) -> None:
    image, digest = new_image(registry, f"bundle-{id(signer)}-{dsse}")
    manifest = fetch_manifest(registry.url, REPO, digest)
    attach_bundle(registry.url, REPO, digest, key_bundle(signer, digest, manifest=manifest, dsse=dsse))
    verdict = checker(client).check(image, digest, KEYS)
    assert verdict.ok, verdict.detail
    assert (verdict.scheme, verdict.signer) == (SignatureScheme.BUNDLE_KEY, signer.key_id)


def test_a_truncated_bundle(registry: RegistryServer, client: RegistryClient) -> None:
    image, digest = new_image(registry, "truncated")
    bundle = key_bundle(EC, digest, dsse=True)
    attach_bundle(registry.url, REPO, digest, bundle[: len(bundle) - 25])
    verdict = checker(client).check(image, digest, KEYS)
    assert (verdict.reason, verdict.scheme) == (P.MALFORMED, SignatureScheme.BUNDLE)


def test_a_bundle_by_a_key_not_in_the_list(registry: RegistryServer, client: RegistryClient) -> None:
    image, digest = new_image(registry, "bundle-stranger")
    attach_bundle(registry.url, REPO, digest, key_bundle(STRANGER, digest, dsse=True))
    assert checker(client).check(image, digest, KEYS).reason is P.WRONG_KEY


def test_a_bundle_about_another_digest(registry: RegistryServer, client: RegistryClient) -> None:
    _other, other_digest = new_image(registry, "bundle-other")
    image, digest = new_image(registry, "bundle-misnamed")
    attach_bundle(registry.url, REPO, digest, key_bundle(ED, digest, dsse=True, subject_digest=other_digest))
    assert checker(client).check(image, digest, KEYS).reason is P.DIGEST_MISMATCH


def test_the_referrers_tag_lists_every_bundle(registry: RegistryServer, client: RegistryClient) -> None:
    image, digest = new_image(registry, "bundles")
    attach_bundle(registry.url, REPO, digest, key_bundle(STRANGER, digest, dsse=True))
    attach_bundle(registry.url, REPO, digest, key_bundle(EC, digest, dsse=True))
    found = client.referrers(image, digest, artifact_type=BUNDLE_V03)
    assert len(found) == 2 and all(d.artifact_type == BUNDLE_V03 for d in found)
    assert client.referrers(image, digest, artifact_type="application/vnd.example.sbom") == []
    assert checker(client).check(image, digest, KEYS).ok


# --- keyless --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sigstore() -> Iterator[LocalSigstore]:
    local = LocalSigstore()
    with local.serve_log() as url:
        local.log_url = url
        yield local


def keyless_policy(local: LocalSigstore, *, online: bool = False) -> SignaturePolicy:
    return SignaturePolicy(
        identities=(KeylessIdentity(ISSUER, WHO),),
        trusted_root=local.trusted_root(),
        transparency_online=online,
    )


@pytest.mark.parametrize("dsse", [False, True], ids=["message", "dsse"])
def test_keyless_offline(
    registry: RegistryServer, client: RegistryClient, sigstore: LocalSigstore, dsse: bool
) -> None:
    image, digest = new_image(registry, f"keyless-{dsse}")
    attach_bundle(registry.url, REPO, digest, sigstore.keyless_bundle(digest, WHO, ISSUER, dsse=dsse))
    verdict = checker(client).check(image, digest, keyless_policy(sigstore))
    assert verdict.ok, verdict.detail
    assert (verdict.scheme, verdict.signer) == (SignatureScheme.BUNDLE_KEYLESS, f"{WHO} ({ISSUER})")


def test_keyless_with_an_expired_certificate(
    registry: RegistryServer, client: RegistryClient, sigstore: LocalSigstore
) -> None:
    image, digest = new_image(registry, "keyless-expired")
    issued_long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)
    attach_bundle(
        registry.url, REPO, digest, sigstore.keyless_bundle(digest, WHO, ISSUER, valid_from=issued_long_ago)
    )
    verdict = checker(client).check(image, digest, keyless_policy(sigstore))
    assert verdict.reason is P.EXPIRED, verdict.detail


def test_keyless_for_another_identity(
    registry: RegistryServer, client: RegistryClient, sigstore: LocalSigstore
) -> None:
    image, digest = new_image(registry, "keyless-mallory")
    attach_bundle(registry.url, REPO, digest, sigstore.keyless_bundle(digest, "mallory@example.com", ISSUER))
    assert checker(client).check(image, digest, keyless_policy(sigstore)).reason is P.WRONG_IDENTITY


def test_keyless_online_asks_the_log(
    registry: RegistryServer, client: RegistryClient, sigstore: LocalSigstore
) -> None:
    image, digest = new_image(registry, "keyless-online")
    attach_bundle(registry.url, REPO, digest, sigstore.keyless_bundle(digest, WHO, ISSUER))
    assert checker(client).check(image, digest, keyless_policy(sigstore, online=True)).ok

    forgotten, forgotten_digest = new_image(registry, "keyless-unlogged")
    attach_bundle(
        registry.url, REPO, forgotten_digest, sigstore.keyless_bundle(forgotten_digest, WHO, ISSUER)
    )
    sigstore.entries.pop(max(sigstore.entries))  # the log never published it: valid offline, not online
    assert checker(client).check(forgotten, forgotten_digest, keyless_policy(sigstore)).ok
    verdict = checker(client).check(forgotten, forgotten_digest, keyless_policy(sigstore, online=True))
    assert verdict.reason is P.BAD_SIGNATURE, verdict.detail


def test_keyless_online_with_the_log_down_is_unavailable(
    registry: RegistryServer, client: RegistryClient
) -> None:
    offline = LocalSigstore(log_url=f"http://127.0.0.1:{free_port()}")
    image, digest = new_image(registry, "keyless-log-down")
    attach_bundle(registry.url, REPO, digest, offline.keyless_bundle(digest, WHO, ISSUER))
    assert checker(client).check(image, digest, keyless_policy(offline)).ok
    verdict = checker(client).check(image, digest, keyless_policy(offline, online=True))
    assert verdict.reason is P.UNAVAILABLE and verdict.retryable


# --- the registry API underneath ----------------------------------------------------------------------


def test_fetch_blob_is_verified_and_bounded(registry: RegistryServer, client: RegistryClient) -> None:
    image, digest = new_image(registry, "blobs")
    sign_image(registry.url, REPO, digest, EC)
    layer = json.loads(fetch_manifest(registry.url, REPO, signature_tag(digest)))["layers"][0]
    payload = client.fetch_blob(image, layer["digest"], 64 * 1024)
    assert json.loads(payload)["critical"]["image"]["docker-manifest-digest"] == digest
    with pytest.raises(ContentTooLarge):
        client.fetch_blob(image, layer["digest"], len(payload) - 1)
    with pytest.raises(BlobNotFound):
        client.fetch_blob(image, "sha256:" + "1" * 64, 1024)


def test_a_registry_that_does_not_answer_is_unavailable() -> None:
    port = free_port()
    with RegistryClient(
        lambda _r: RegistryAccess(insecure=True), retry=RetryPolicy(attempts=1), timeout=2.0
    ) as down:
        verdict = RegistrySignatureChecker(down).check(
            ImageRef(f"127.0.0.1:{port}", REPO), "sha256:" + "2" * 64, KEYS
        )
    assert verdict.reason is P.UNAVAILABLE and verdict.retryable


class ReferrersFront:
    """An OCI 1.1 registry front on 127.0.0.1: ``/v2/<name>/referrers/<digest>`` answered from
    ``indexes`` (pages: a list of index bodies, linked by ``Link`` headers), everything else passed to
    the real registry. ``seen`` records the referrers requests (path and query)."""

    def __init__(self, upstream: str) -> None:
        self.indexes: dict[str, list[bytes]] = {}
        self.seen: list[str] = []
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if "/referrers/" in parts.path:
                    front.seen.append(self.path)
                    digest = parts.path.rsplit("/", 1)[1]
                    pages = front.indexes.get(digest)
                    if pages is None:
                        self._answer(
                            200,
                            {"Content-Type": OCI_INDEX},
                            json.dumps(
                                {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}
                            ).encode(),
                        )
                        return
                    page = int(parse_qs(parts.query).get("page", ["0"])[0])
                    headers = {"Content-Type": OCI_INDEX}
                    if page + 1 < len(pages):
                        headers["Link"] = f'<{parts.path}?page={page + 1}>; rel="next"'
                    self._answer(200, headers, pages[page])
                    return
                got = httpx.get(
                    upstream + self.path,
                    headers={
                        k: v for k, v in self.headers.items() if k.lower() in ("accept", "authorization")
                    },
                )
                self._answer(
                    got.status_code,
                    {
                        k: v
                        for k, v in got.headers.items()
                        if k.lower() in ("content-type", "docker-content-digest")
                    },
                    got.content,
                )

            def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def front(registry: RegistryServer) -> Iterator[ReferrersFront]:
    f = ReferrersFront(registry.url)
    yield f
    f.close()


def test_the_referrers_api_is_used_when_the_registry_has_it(
    registry: RegistryServer, client: RegistryClient, front: ReferrersFront
) -> None:
    _image, digest = new_image(registry, "api")
    manifest = fetch_manifest(registry.url, REPO, digest)
    stranger = attach_bundle(
        registry.url, REPO, digest, key_bundle(STRANGER, digest, manifest=manifest), tag_schema=False
    )
    trusted = attach_bundle(
        registry.url, REPO, digest, key_bundle(ED, digest, manifest=manifest), tag_schema=False
    )
    sizes = {d: len(fetch_manifest(registry.url, REPO, d)) for d in (stranger, trusted)}

    def entry(d: str, artifact_type: str = BUNDLE_V03) -> dict[str, object]:
        return {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": d,
            "size": sizes[d],
            "artifactType": artifact_type,
        }

    first = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [entry(stranger), {"digest": "junk"}, entry(stranger, "application/vnd.example.sbom")],
    }
    second = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [entry(trusted)]}
    front.indexes[digest] = [json.dumps(first).encode(), json.dumps(second).encode()]
    image = ImageRef(front.host, REPO, "api")

    found = client.referrers(image, digest, artifact_type=BUNDLE_V03)
    assert [d.digest for d in found] == [stranger, trusted]  # both pages, the junk and the sbom left out
    asked = urlsplit(front.seen[0])
    assert asked.path == f"/v2/{REPO}/referrers/{digest}"
    assert parse_qs(asked.query) == {"artifactType": [BUNDLE_V03]}
    assert not httpx.get(
        f"{registry.url}/v2/{REPO}/manifests/{referrers_tag(digest)}"
    ).is_success  # no tag schema here

    verdict = checker(client).check(image, digest, KEYS)
    assert verdict.ok and verdict.signer == ED.key_id, verdict.detail
    assert (
        checker(client).check(image, digest, SignaturePolicy(public_keys=(EC.public_pem,))).reason
        is P.WRONG_KEY
    )
