"""How a custom resource (Argo Rollouts' Rollout; any kind whose profile says ``PatchType.JSON``)
takes tagpin's change of one image (``tagpin.adapters.kubernetes.workloads``).

Every kind's profile writes the change as one body (``tagpin.domain.kinds.Profile.patch_body``): one
container's image and tagpin's pod-template annotations, merged by container name, with the
``resourceVersion`` tagpin read as a precondition. The API server applies it as a strategic merge
patch to the built-in kinds, but a custom resource has no patch strategies and answers a strategic
merge patch with 415. Of the two patch types it accepts:

- a JSON merge patch (RFC 7386) replaces a list whole: to change one image it would have to send
  every container of the pod template back, as tagpin last read them (their env, their secret
  references), which is far more than tagpin means to write;
- a JSON patch (RFC 6902) addresses one field. So :func:`json_patch` turns the body into one, from
  the object as just read: the container is addressed by its index, and a ``test`` of the name at
  that index guards it; only the image and the annotations are written. The precondition is a
  ``replace`` of ``metadata.resourceVersion`` with the one tagpin read: the API server's
  optimistic concurrency answers a stale one with 409 Conflict, as it does for the built-in kinds,
  and the caller reads again (``tagpin.usecases.patch.patch_with_retries``). (A ``test`` of the
  resourceVersion would refuse it too, but with 422 Invalid, which reads like a malformed patch.)

The adapter reads the object right before patching it (one GET more than for the built-in kinds,
for the container's index); a read that is already stale is a ``Conflict`` without a PATCH.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Lists of the pod template whose items are merged by name (their patch merge key)
_BY_NAME = frozenset({"containers", "initContainers"})

Operation = dict[str, Any]


def json_patch(body: Mapping[str, Any], current: Mapping[str, Any]) -> list[Operation]:
    """The JSON patch that does to ``current`` (the object as read) what the strategic-merge-style
    ``body`` asks: maps merged, items of the container lists merged by name (addressed by index,
    guarded by a ``test`` of their name), ``null`` removes; ``metadata.resourceVersion`` becomes
    the precondition, last."""
    metadata = dict(body.get("metadata") or {})
    version = metadata.pop("resourceVersion", None)
    rest = {k: v for k, v in body.items() if k != "metadata"} | ({"metadata": metadata} if metadata else {})
    ops: list[Operation] = []
    _operations(ops, "", rest, current)
    if version:
        ops.append({"op": "replace", "path": "/metadata/resourceVersion", "value": str(version)})
    return ops


def _operations(ops: list[Operation], path: str, patch: Mapping[str, Any], current: Any) -> None:
    for key, value in patch.items():
        here = f"{path}/{_escape(key)}"
        if not isinstance(current, Mapping) or key not in current:
            if value is not None:  # absent: added whole (its parent exists: it was recursed into)
                ops.append({"op": "add", "path": here, "value": value})
            continue
        existing = current[key]
        if value is None:
            ops.append({"op": "remove", "path": here})
        elif isinstance(value, Mapping) and isinstance(existing, Mapping):
            _operations(ops, here, value, existing)
        elif key in _BY_NAME and isinstance(value, list) and isinstance(existing, list):
            names = [item.get("name") if isinstance(item, Mapping) else None for item in existing]
            for item in value:
                if not isinstance(item, Mapping) or not item.get("name"):
                    raise ValueError(f"{here}: every item needs a name")
                name = item["name"]
                if name not in names:
                    ops.append({"op": "add", "path": f"{here}/-", "value": dict(item)})
                    names.append(name)
                    continue
                index = names.index(name)
                ops.append({"op": "test", "path": f"{here}/{index}/name", "value": name})
                fields = {k: v for k, v in item.items() if k != "name"}
                _operations(ops, f"{here}/{index}", fields, existing[index])
        else:
            ops.append({"op": "replace", "path": here, "value": value})


def _escape(key: str) -> str:
    """A JSON pointer token (RFC 6901): annotation keys contain ``/``."""
    return key.replace("~", "~0").replace("/", "~1")
