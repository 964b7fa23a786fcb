"""Keyless Sigstore bundles (a Fulcio certificate), verified offline with the ``sigstore`` package.

``sigstore.verify.Verifier`` against the policy's trusted root (``trusted_root.json``: Fulcio CAs,
CT log keys, Rekor keys, timestamp authorities) does every check of the Sigstore client spec without
a network call: a signed time (the log's integrated time under its inclusion promise, or an RFC 3161
timestamp), the certificate chain at that time, its embedded SCT, the Sigstore X.509 profile, the
log entry's inclusion proof, signed checkpoint and promise, the entry's consistency with the bundle,
and the signature. The identity check is this module's (``_Identities``, called by the verifier at
its step): issuer exact, identity exact or a regular expression, as ``KeylessIdentity`` says.

With ``transparency_online`` the log is also asked (``GET <baseUrl>/api/v1/log/entries?logIndex=``)
whether it holds that very entry: a bundle whose log key was misused offline is caught there. The
log not answering is ``UNAVAILABLE``, like a registry.

sigstore's exceptions become verdicts: the identity check failing ``WRONG_IDENTITY``; the chain not
building ``EXPIRED`` when the certificate was not valid at the signed time, else ``WRONG_KEY`` (not
issued under the trusted root); an unreadable bundle ``MALFORMED``; any other failed check
(signature, SCT, inclusion proof, checkpoint, promise) ``BAD_SIGNATURE``. Imported only when a
keyless bundle turns up: sigstore and its dependencies cost cold-start time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import Any

from cryptography.x509 import (
    Certificate,
    ExtensionNotFound,
    ObjectIdentifier,
    OtherName,
    RFC822Name,
    SubjectAlternativeName,
    UniformResourceIdentifier,
)
from sigstore.errors import CertValidationError, Error, VerificationError
from sigstore.hashes import Hashed
from sigstore.models import Bundle, InvalidBundle, TrustedRoot
from sigstore.verify import Verifier
from sigstore_models.common.v1 import HashAlgorithm
from sigstore_models.trustroot import v1 as trustroot_v1

from tagpin.adapters.signatures.bundles import statement_verdict
from tagpin.adapters.signatures.reading import Reading
from tagpin.ports.signatures import (
    KeylessIdentity,
    SignaturePolicy,
    SignatureProblem,
    SignatureScheme,
    SignatureVerdict,
)

SCHEME = SignatureScheme.BUNDLE_KEYLESS
ISSUER_V1 = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")  # raw bytes of the issuer URL
ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")  # DER UTF8String
SAN_OTHERNAME = ObjectIdentifier("1.3.6.1.4.1.57264.1.7")
LOG_TIMEOUT = 5.0  # seconds for the online log lookup
MAX_LOG_ANSWER = 1024 * 1024
ISO = "%Y-%m-%dT%H:%M:%SZ"

_roots: dict[str, TrustedRoot] = {}
_roots_lock = threading.Lock()


def trusted_root(text: str) -> TrustedRoot:
    """The policy's trusted root, parsed once per text; ValueError for one sigstore cannot use."""
    key = hashlib.sha256(text.encode()).hexdigest()
    with _roots_lock:
        found = _roots.get(key)
    if found is None:
        try:
            # The text is configuration, not a file: sigstore's own constructor of a parsed root.
            found = TrustedRoot(trustroot_v1.TrustedRoot.from_json(text))
            Verifier(trusted_root=found)  # needs a log and CAs
        except (Error, ValueError) as exc:
            raise ValueError(f"unusable Sigstore trusted root: {str(exc)[:200]}") from None
        with _roots_lock:
            _roots[key] = found
    return found


def _verdict(problem: SignatureProblem | None, detail: str, signer: str = "") -> SignatureVerdict:
    return SignatureVerdict(problem is None, problem, detail, SCHEME, signer)


class _IdentityMismatch(VerificationError):
    pass


def certificate_identity(cert: Certificate) -> tuple[str, list[str]]:
    """(OIDC issuer, identities) of a Fulcio certificate: the issuer extension (v2, else v1) and the
    subject alternative names (emails, URIs, Sigstore other names)."""
    issuer = ""
    try:
        raw = cert.extensions.get_extension_for_oid(ISSUER_V2).value.public_bytes()
        issuer = _der_utf8(raw)
    except (ExtensionNotFound, ValueError):
        try:
            issuer = cert.extensions.get_extension_for_oid(ISSUER_V1).value.public_bytes().decode()
        except (ExtensionNotFound, ValueError, UnicodeDecodeError):
            issuer = ""
    names: list[str] = []
    try:
        san = cert.extensions.get_extension_for_class(SubjectAlternativeName).value
    except ExtensionNotFound:
        return issuer, names
    names += san.get_values_for_type(RFC822Name)
    names += san.get_values_for_type(UniformResourceIdentifier)
    for other in san.get_values_for_type(OtherName):
        if other.type_id == SAN_OTHERNAME:
            try:
                names.append(_der_utf8(other.value))
            except ValueError:
                continue
    return issuer, names


def _der_utf8(raw: bytes) -> str:
    """A DER UTF8String (tag 0x0c, short or long length)."""
    if len(raw) < 2 or raw[0] != 0x0C:
        raise ValueError("not a UTF8String")
    length, offset = raw[1], 2
    if length & 0x80:
        count = length & 0x7F
        length, offset = int.from_bytes(raw[2 : 2 + count]), 2 + count
    if offset + length != len(raw):
        raise ValueError("bad UTF8String length")
    return raw[offset:].decode()


class _Identities:
    """A sigstore ``VerificationPolicy``: the certificate names one of the allowed identities."""

    def __init__(self, allowed: tuple[KeylessIdentity, ...]) -> None:
        self.allowed = allowed
        self.signer = ""

    def verify(self, cert: Certificate) -> None:
        issuer, names = certificate_identity(cert)
        for identity in self.allowed:
            for name in names:
                if identity.matches(issuer, name):
                    self.signer = f"{name} ({issuer})"
                    return
        shown = ", ".join(n[:80] for n in names[:3]) or "none"
        raise _IdentityMismatch(f"certificate identity {shown} from issuer {issuer[:80]!r} is not allowed")


def verify(
    bundle_bytes: bytes, doc: dict[str, Any], reading: Reading, policy: SignaturePolicy, where: str
) -> SignatureVerdict:
    assert policy.trusted_root is not None
    verifier = Verifier(trusted_root=trusted_root(policy.trusted_root))
    try:
        bundle = Bundle.from_json(bundle_bytes)
    except (InvalidBundle, Error, ValueError, TypeError) as exc:
        return _verdict(SignatureProblem.MALFORMED, f"{where}: {str(exc)[:160]}")
    algorithm, _, hexpart = reading.digest.partition(":")
    identities = _Identities(policy.identities)
    try:
        if bundle._dsse_envelope is not None:
            payload_type, payload = verifier.verify_dsse(bundle, identities)
            verdict = statement_verdict(
                payload_type, payload, reading.digest, where, SCHEME, identities.signer
            )
            if not verdict.ok:
                return verdict
        else:
            if algorithm != "sha256":
                return _verdict(SignatureProblem.UNSUPPORTED, f"{where}: only sha256 image digests")
            signed = doc.get("messageSignature") or {}
            claimed = signed.get("messageDigest") if isinstance(signed, dict) else None
            named = claimed.get("digest") if isinstance(claimed, dict) else None
            if isinstance(named, str) and named != base64.b64encode(bytes.fromhex(hexpart)).decode():
                return _verdict(SignatureProblem.DIGEST_MISMATCH, f"{where}: the bundle signs another digest")
            hashed = Hashed(algorithm=HashAlgorithm.SHA2_256, digest=bytes.fromhex(hexpart))
            verifier.verify_artifact(hashed, bundle, identities)
    except _IdentityMismatch as exc:
        return _verdict(SignatureProblem.WRONG_IDENTITY, f"{where}: {exc}")
    except CertValidationError as exc:
        return _chain_problem(bundle, where, str(exc))
    except VerificationError as exc:
        if "expired" in str(exc):
            return _chain_problem(bundle, where, str(exc))
        return _verdict(SignatureProblem.BAD_SIGNATURE, f"{where}: {str(exc)[:160]}")
    except (Error, ValueError, TypeError, KeyError) as exc:
        return _verdict(SignatureProblem.MALFORMED, f"{where}: {type(exc).__name__}: {str(exc)[:120]}")
    if policy.transparency_online:
        problem = _online(bundle, policy.trusted_root)
        if problem is not None:
            return _verdict(problem[0], f"{where}: {problem[1]}", identities.signer)
    return _verdict(None, f"{where}: signed by {identities.signer}", identities.signer)


def _signed_time(bundle: Bundle) -> datetime | None:
    integrated = bundle.log_entry._inner.integrated_time
    return datetime.fromtimestamp(int(integrated), tz=UTC) if integrated else None


def _chain_problem(bundle: Bundle, where: str, message: str) -> SignatureVerdict:
    cert = bundle.signing_certificate
    when = _signed_time(bundle)
    if when is not None and not (cert.not_valid_before_utc <= when <= cert.not_valid_after_utc):
        return _verdict(
            SignatureProblem.EXPIRED,
            f"{where}: the certificate (valid {cert.not_valid_before_utc:{ISO}} to "
            f"{cert.not_valid_after_utc:{ISO}}) was not valid when signed ({when:{ISO}})",
        )
    return _verdict(
        SignatureProblem.WRONG_KEY, f"{where}: not issued under the trusted root ({message[:120]})"
    )


def _online(bundle: Bundle, root_text: str) -> tuple[SignatureProblem, str] | None:
    """Ask the transparency log for the bundle's entry; None when it holds exactly that entry."""
    entry = bundle.log_entry._inner
    try:
        tlogs = json.loads(root_text).get("tlogs") or []
        base = str(tlogs[0]["baseUrl"]).rstrip("/")
    except (ValueError, AttributeError, IndexError, KeyError, TypeError):
        return SignatureProblem.MALFORMED, "the trusted root names no transparency log URL"
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        return SignatureProblem.MALFORMED, "the transparency log URL is not http(s)"
    url = f"{base}/api/v1/log/entries?{urllib.parse.urlencode({'logIndex': entry.log_index})}"
    try:
        with urllib.request.urlopen(url, timeout=LOG_TIMEOUT) as answer:  # noqa: S310 (http(s) checked)
            body = answer.read(MAX_LOG_ANSWER + 1)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return SignatureProblem.BAD_SIGNATURE, f"the transparency log has no entry {entry.log_index}"
        return SignatureProblem.UNAVAILABLE, f"the transparency log answered HTTP {exc.code}"
    except (OSError, TimeoutError) as exc:
        return SignatureProblem.UNAVAILABLE, f"the transparency log did not answer ({type(exc).__name__})"
    try:
        found = list(json.loads(body[:MAX_LOG_ANSWER]).values())
        logged = found[0] if len(found) == 1 else {}
        same = (
            base64.b64decode(logged["body"]) == entry.canonicalized_body
            and int(logged["integratedTime"]) == int(entry.integrated_time or 0)
            and int(logged["logIndex"]) == int(entry.log_index)
        )
    except (ValueError, AttributeError, KeyError, TypeError):
        return SignatureProblem.UNAVAILABLE, "the transparency log's answer is unreadable"
    if not same:
        return (
            SignatureProblem.BAD_SIGNATURE,
            f"the transparency log holds another entry at {entry.log_index}",
        )
    return None
