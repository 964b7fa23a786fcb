"""A Sigstore of its own for tests and the demo: a Fulcio CA, a CT log and a Rekor log, all keys made
here, and the ``trusted_root.json`` that trusts them. Nothing leaves the machine.

``LocalSigstore.keyless_bundle`` does what ``cosign sign`` does keyless, minus the OIDC dance: an
ephemeral P-256 key, a short-lived code-signing certificate for an identity and issuer (Fulcio's
profile: empty subject, critical SAN, the issuer extensions 1.3.6.1.4.1.57264.1.1 and .8, an embedded
precertificate SCT signed by the CT log), the signature (over the image manifest, i.e. its digest,
or a DSSE envelope of an in-toto statement), and a Rekor v1 entry (hashedrekord or dsse 0.0.1) with
its inclusion proof in a small Merkle tree (RFC 6962), a signed checkpoint and a signed entry
timestamp (the inclusion promise). ``sigstore``'s ``Verifier`` accepts it offline against
``trusted_root()``; every field can be bent for tests (another validity, another signing time).

``serve_log`` answers ``GET /api/v1/log/entries?logIndex=N`` for the entries made, on 127.0.0.1,
for the online transparency check.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import http.server
import json
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tagpin_local.cosign import BUNDLE_V03, IN_TOTO, canonical, intoto_statement, pae

TRUSTED_ROOT_TYPE = "application/vnd.dev.sigstore.trustedroot+json;version=0.1"
ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
SCT_LIST = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
LOG_NAME = "rekor.tagpin.local"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _spki(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def _der(tag: int, content: bytes) -> bytes:
    return bytes([tag]) + _der_length(len(content)) + content


def _leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def merkle_root(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


def merkle_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 PATH(index, leaves): sibling hashes from the leaf level up."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*merkle_path(index, leaves[:k]), merkle_root(leaves[k:])]
    return [*merkle_path(index - k, leaves[k:]), merkle_root(leaves[:k])]


@dataclass(frozen=True)
class Issued:
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate


class LocalSigstore:
    """One Sigstore instance: ``trusted_root()`` trusts it; ``keyless_bundle`` signs with it."""

    def __init__(self, log_url: str = "http://127.0.0.1:9") -> None:
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        self.log_url = log_url
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ct_key = ec.generate_private_key(ec.SECP256R1())
        self.log_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "tagpin"),
                x509.NameAttribute(NameOID.COMMON_NAME, "tagpin-local-fulcio"),
            ]
        )
        ski = x509.SubjectKeyIdentifier.from_public_key(self.ca_key.public_key())
        self.ca = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=365))
            .not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .add_extension(ski, critical=False)
            .sign(self.ca_key, hashes.SHA256())
        )
        self.log_id = hashlib.sha256(_spki(self.log_key)).digest()
        self.ct_log_id = hashlib.sha256(_spki(self.ct_key)).digest()
        self.entries: dict[int, dict[str, Any]] = {}  # log index -> the entry as Rekor's API serves it
        self._leaves: list[bytes] = [_leaf_hash(b"tagpin local log genesis")]
        self._lock = threading.Lock()

    # --- the trusted root ---------------------------------------------------------------------------

    def _tlog(self, key: ec.EllipticCurvePrivateKey, log_id: bytes, url: str) -> dict[str, Any]:
        return {
            "baseUrl": url,
            "hashAlgorithm": "SHA2_256",
            "publicKey": {
                "rawBytes": _b64(_spki(key)),
                "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                "validFor": {"start": "2020-01-01T00:00:00Z"},
            },
            "logId": {"keyId": _b64(log_id)},
        }

    def trusted_root(self) -> str:
        """The ``trusted_root.json`` text for this instance."""
        return json.dumps(
            {
                "mediaType": TRUSTED_ROOT_TYPE,
                "tlogs": [self._tlog(self.log_key, self.log_id, self.log_url)],
                "certificateAuthorities": [
                    {
                        "subject": {"organization": "tagpin", "commonName": "tagpin-local-fulcio"},
                        "uri": "http://127.0.0.1",
                        "certChain": {
                            "certificates": [
                                {"rawBytes": _b64(self.ca.public_bytes(serialization.Encoding.DER))}
                            ]
                        },
                        "validFor": {"start": "2020-01-01T00:00:00Z"},
                    }
                ],
                "ctlogs": [self._tlog(self.ct_key, self.ct_log_id, "http://127.0.0.1:9")],
                "timestampAuthorities": [],
            }
        )

    # --- Fulcio ---------------------------------------------------------------------------------------

    def issue(self, identity: str, issuer: str, *, not_before: dt.datetime, not_after: dt.datetime) -> Issued:
        """A Fulcio-style code-signing certificate for ``identity`` (an email, or a URI when it has
        ``://``) from OIDC ``issuer``, with an embedded SCT."""
        key = ec.generate_private_key(ec.SECP256R1())
        san: x509.GeneralName = (
            x509.UniformResourceIdentifier(identity) if "://" in identity else x509.RFC822Name(identity)
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()), critical=False
            )
            .add_extension(x509.SubjectAlternativeName([san]), critical=True)
            .add_extension(x509.UnrecognizedExtension(ISSUER_V1, issuer.encode()), critical=False)
            .add_extension(x509.UnrecognizedExtension(ISSUER_V2, _der(0x0C, issuer.encode())), critical=False)
        )
        precert = builder.sign(self.ca_key, hashes.SHA256())
        sct = self._sct(precert.tbs_certificate_bytes, not_before)
        cert = builder.add_extension(x509.UnrecognizedExtension(SCT_LIST, sct), critical=False).sign(
            self.ca_key, hashes.SHA256()
        )
        return Issued(key, cert)

    def _sct(self, tbs: bytes, when: dt.datetime) -> bytes:
        """The SCT list extension's value for a precertificate whose TBS is ``tbs``."""
        millis = int(when.timestamp()) * 1000  # whole seconds: exact through datetime and back
        issuer_key_hash = hashlib.sha256(_spki(self.ca_key)).digest()
        signed = (
            struct.pack("!BBQH", 0, 0, millis, 1)
            + issuer_key_hash
            + len(tbs).to_bytes(3, "big")
            + tbs
            + struct.pack("!H", 0)
        )
        signature = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (
            struct.pack("!B", 0)
            + self.ct_log_id
            + struct.pack("!QH", millis, 0)
            + struct.pack("!BBH", 4, 3, len(signature))
            + signature
        )
        listed = struct.pack("!H", len(sct)) + sct
        return _der(0x04, struct.pack("!H", len(listed)) + listed)

    # --- Rekor ------------------------------------------------------------------------------------------

    def _log_entry(self, kind: str, body: bytes, integrated: int) -> dict[str, Any]:
        with self._lock:
            self._leaves.append(_leaf_hash(body))
            leaves = list(self._leaves)
            index = len(leaves) - 1
        root = merkle_root(leaves)
        note = f"{LOG_NAME} - 1\n{len(leaves)}\n{_b64(root)}\n"
        note_sig = self.log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        checkpoint = f"{note}\n\u2014 {LOG_NAME} {_b64(self.log_id[:4] + note_sig)}\n"
        promise = rfc8785.dumps(
            {"body": _b64(body), "integratedTime": integrated, "logID": self.log_id.hex(), "logIndex": index}
        )
        set_sig = self.log_key.sign(promise, ec.ECDSA(hashes.SHA256()))
        self.entries[index] = {
            "body": _b64(body),
            "integratedTime": integrated,
            "logID": self.log_id.hex(),
            "logIndex": index,
        }
        return {
            "logIndex": str(index),
            "logId": {"keyId": _b64(self.log_id)},
            "kindVersion": {"kind": kind, "version": "0.0.1"},
            "integratedTime": str(integrated),
            "inclusionPromise": {"signedEntryTimestamp": _b64(set_sig)},
            "inclusionProof": {
                "logIndex": str(index),
                "rootHash": _b64(root),
                "treeSize": str(len(leaves)),
                "hashes": [_b64(h) for h in merkle_path(index, leaves)],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": _b64(body),
        }

    # --- signing ----------------------------------------------------------------------------------------

    def keyless_bundle(
        self,
        digest: str,
        identity: str,
        issuer: str,
        *,
        dsse: bool = False,
        subject_digest: str | None = None,
        signed_at: dt.datetime | None = None,
        valid_from: dt.datetime | None = None,
        valid_for: dt.timedelta = dt.timedelta(minutes=10),
    ) -> bytes:
        """A Sigstore bundle v0.3 signing the image ``digest`` keyless: a message signature over the
        manifest (``subject_digest`` names another digest in ``messageDigest``), or with ``dsse`` an
        in-toto statement about ``subject_digest`` (``digest`` by default). The certificate is valid
        ``valid_for`` from ``valid_from``; the log integrates the entry at ``signed_at`` (both now
        by default): a ``signed_at`` outside the validity is an expired certificate."""
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        signed_at = (signed_at or now).replace(microsecond=0)
        start = (valid_from or signed_at - dt.timedelta(seconds=30)).replace(microsecond=0)
        issued = self.issue(identity, issuer, not_before=start, not_after=start + valid_for)
        pem = issued.certificate.public_bytes(serialization.Encoding.PEM)
        material: dict[str, Any] = {
            "certificate": {"rawBytes": _b64(issued.certificate.public_bytes(serialization.Encoding.DER))}
        }
        integrated = int(signed_at.timestamp())
        doc: dict[str, Any] = {"mediaType": BUNDLE_V03, "verificationMaterial": material}
        if dsse:
            payload = intoto_statement(subject_digest or digest)
            signature = issued.key.sign(pae(IN_TOTO, payload), ec.ECDSA(hashes.SHA256()))
            envelope = {
                "payload": _b64(payload),
                "payloadType": IN_TOTO,
                "signatures": [{"sig": _b64(signature), "keyid": ""}],
            }
            body = canonical(
                {
                    "apiVersion": "0.0.1",
                    "kind": "dsse",
                    "spec": {
                        "envelopeHash": {
                            "algorithm": "sha256",
                            "value": hashlib.sha256(canonical(envelope)).hexdigest(),
                        },
                        "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
                        "signatures": [{"signature": _b64(signature), "verifier": _b64(pem)}],
                    },
                }
            )
            doc["dsseEnvelope"] = envelope
            material["tlogEntries"] = [self._log_entry("dsse", body, integrated)]
        else:
            named = bytes.fromhex((subject_digest or digest).partition(":")[2])
            signature = issued.key.sign(named, ec.ECDSA(Prehashed(hashes.SHA256())))
            body = canonical(
                {
                    "apiVersion": "0.0.1",
                    "kind": "hashedrekord",
                    "spec": {
                        "data": {"hash": {"algorithm": "sha256", "value": named.hex()}},
                        "signature": {"content": _b64(signature), "publicKey": {"content": _b64(pem)}},
                    },
                }
            )
            doc["messageSignature"] = {
                "messageDigest": {"algorithm": "SHA2_256", "digest": _b64(named)},
                "signature": _b64(signature),
            }
            material["tlogEntries"] = [self._log_entry("hashedrekord", body, integrated)]
        return canonical(doc)

    # --- the log's API, for the online check -------------------------------------------------------------

    @contextmanager
    def serve_log(self) -> Iterator[str]:
        """Serve the log's entries on 127.0.0.1; yields the base URL (``trusted_root`` names
        ``log_url``: set it to this before making the root)."""
        store = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                index = parse_qs(parts.query).get("logIndex", [""])[0]
                entry = store.entries.get(int(index)) if index.isdigit() else None
                if parts.path != "/api/v1/log/entries" or entry is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                body = json.dumps({hashlib.sha256(index.encode()).hexdigest(): entry}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
