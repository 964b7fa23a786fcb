"""DSSE envelopes and the in-toto statements they carry (what Sigstore bundles sign for an image).

DSSE signs ``PAE(payloadType, payload)``, never the payload alone, so a signature cannot be moved to
a payload of another type. An in-toto statement names what it is about in ``subject``: each subject
has ``digest`` as ``{algorithm: hex}``. A statement is about an image when one subject carries the
image's digest; any other statement is about something else, however well signed.
"""

from __future__ import annotations

import json
from typing import Any

IN_TOTO = "application/vnd.in-toto+json"
STATEMENT_TYPES = frozenset({"https://in-toto.io/Statement/v1", "https://in-toto.io/Statement/v0.1"})
MAX_SUBJECTS = 64


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: ``DSSEv1 <len> <type> <len> <payload>``."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def statement_subjects(payload: bytes) -> list[dict[str, Any]] | None:
    """The subjects' digests of an in-toto statement; None when ``payload`` is not a statement."""
    try:
        doc = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("_type") not in STATEMENT_TYPES:
        return None
    subjects = doc.get("subject")
    if not isinstance(subjects, list):
        return None
    return [
        s["digest"]
        for s in subjects[:MAX_SUBJECTS]
        if isinstance(s, dict) and isinstance(s.get("digest"), dict)
    ]


def names_digest(subjects: list[dict[str, Any]], digest: str) -> bool:
    algorithm, _, hexpart = digest.partition(":")
    return any(subject.get(algorithm) == hexpart for subject in subjects)
