"""The labels and annotations tagpin reads and writes on workloads (see docs/clusters.md)."""

from __future__ import annotations

import json
from typing import Any

# Opting in, on the workload.
LABEL_FOLLOW = "tagpin.dev/follow"  # "true": discovered by the reconciler (server-side selection)
FOLLOW_SELECTOR = f"{LABEL_FOLLOW}=true"
ANNOTATION_PAUSED = "tagpin.dev/paused"  # "true": left alone (not discovered, not patched)
# "true": a person holds the workload where it is: not patched, not healed (tagpin status shows it)
ANNOTATION_HOLD = "tagpin.dev/hold"
ANNOTATION_CONTAINERS = "tagpin.dev/containers"  # "web,migrate": only these containers
# A version policy (docs/policies.md): the workload follows the newest version it allows instead
# of its tag ("~1.4", "numeric", or the policy's fields as JSON); ANNOTATION_POLICY + "." +
# container sets one container's.
ANNOTATION_POLICY = "tagpin.dev/policy"
# Written by tagpin on the pod template, so a rollout is visible with `kubectl describe`.
ANNOTATION_DIGESTS = "tagpin.dev/digests"  # container -> digest (JSON)
ANNOTATION_APPLIED_AT = "tagpin.dev/applied-at"
ANNOTATION_TRIGGER = "tagpin.dev/trigger"
ANNOTATION_ROLLED_BACK = "tagpin.dev/rolled-back-from"  # the digest that failed
# container -> {"image": what tagpin's patch replaced, "claim": the claim's time} (JSON): what a hold
# written while tagpin patched puts back (tagpin.usecases.interrupted)
ANNOTATION_REPLACED = "tagpin.dev/replaced"


def is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "yes", "1", "on")


NOTE_MAX_CHARS = 16_384  # tagpin's own JSON notes are a few hundred characters per container


def json_note(text: str | None) -> dict[str, Any]:
    """A JSON annotation's object. A cluster's text: anything else, longer than ``NOTE_MAX_CHARS``
    or nested past the parser's depth (``RecursionError``, not a ``ValueError``), is no note."""
    if not text or len(text) > NOTE_MAX_CHARS:
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
