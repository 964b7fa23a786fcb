"""PATCH semantics: strategic merge patch, JSON merge patch (RFC 7386), JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
import json
from typing import Any

from .resources import ApiError, Obj, Resource

# Patch merge keys of the lists tagpin's workloads contain (k8s.io/api struct tags).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "ownerReferences": "uid",
    "resourceClaims": "name",
}
_SET_LISTS = {"finalizers"}  # primitive lists with patchStrategy=merge


def _strip(value: Any) -> Any:
    """A patch value added where nothing existed: drop directives and nulls."""
    if isinstance(value, dict):
        return strategic_merge({}, value)
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and v.get("$patch") == "delete")]
    return copy.deepcopy(value)


def _merge_list(key: str, orig: list[Any], patch: list[Any]) -> list[Any]:
    mkey = MERGE_KEYS.get(key)
    if key in _SET_LISTS and all(not isinstance(p, dict | list) for p in patch):
        return copy.deepcopy(orig) + [p for p in patch if p not in orig]
    if mkey is None or not all(isinstance(p, dict) for p in patch):
        return _strip(patch)  # type: ignore[no-any-return]
    if any(p.get("$patch") == "replace" for p in patch):
        return [_strip(p) for p in patch if p.get("$patch") != "replace"]
    result = [copy.deepcopy(o) for o in orig]
    for item in patch:
        if mkey not in item:
            raise ApiError(400, f"map in list {key} is missing its merge key {mkey!r}")
        idx = next(
            (i for i, o in enumerate(result) if isinstance(o, dict) and o.get(mkey) == item[mkey]), None
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                del result[idx]
        elif idx is None:
            result.append(_strip(item))
        else:
            result[idx] = strategic_merge(result[idx], item)
    return result


def strategic_merge(orig: Any, patch: Any) -> Any:
    """Apply a Kubernetes strategic merge patch (the subset pod templates need)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if k != "$patch"})
    if directive == "delete":
        return None
    if directive is not None:
        raise ApiError(400, f"unknown patch directive {directive!r}")
    result: Obj = copy.deepcopy(orig) if isinstance(orig, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            fld = key.split("/", 1)[1]
            if isinstance(result.get(fld), list):
                result[fld] = [v for v in result[fld] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            cur = result.get(key)
            result[key] = _merge_list(key, cur if isinstance(cur, list) else [], value)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: Obj = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            raise ApiError(422, f"path /{'/'.join(parts)} does not exist")
    return doc


def _json_add(doc: Any, parts: list[str], value: Any, replace: bool = False) -> Any:
    if not parts:
        return copy.deepcopy(value)
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise ApiError(422, f"replace target {last!r} does not exist")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = copy.deepcopy(value)
            else:
                parent.insert(int(last), copy.deepcopy(value))
        else:
            raise ApiError(422, f"invalid array index {last!r}")
    else:
        raise ApiError(422, "add target is not a container")
    return doc


def _json_remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise ApiError(422, "cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise ApiError(422, f"remove target /{'/'.join(parts)} does not exist")


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, f"invalid json patch operation {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ApiError(400, f"json patch {kind} needs a value")
        if kind == "add":
            doc = _json_add(doc, parts, op["value"])
        elif kind == "replace":
            doc = _json_add(doc, parts, op["value"], replace=True)
        elif kind == "remove":
            _json_remove(doc, parts)
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = _json_remove(doc, src) if kind == "move" else copy.deepcopy(_walk(doc, src))
            doc = _json_add(doc, parts, value)
        elif kind == "test":
            if _walk(doc, parts) != op["value"]:
                raise ApiError(422, f"testing value {op['path']} failed: test failed")
        else:
            raise ApiError(400, f"unknown json patch op {kind!r}")
    return doc


_UNKNOWN_FORMAT = "the body of the request was in an unknown format - accepted media types include: "
_CUSTOM_TYPES = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"


def _patched(current: Obj, ctype: str | None, body: bytes, res: Resource | None = None) -> Obj:
    mt = (ctype or "").split(";")[0].strip().lower()
    if res is not None and res.custom and mt == "application/strategic-merge-patch+json":
        # Custom resources have no patch strategies (no Go struct tags): the API server refuses it.
        raise ApiError(
            415,
            _UNKNOWN_FORMAT + _CUSTOM_TYPES,
        )
    try:
        patch = json.loads(body or b"null")
    except ValueError as exc:
        raise ApiError(400, f"invalid JSON in patch body: {exc}") from None
    if mt == "application/strategic-merge-patch+json":
        if not isinstance(patch, dict):
            raise ApiError(400, "strategic merge patch must be a JSON object")
        result = strategic_merge(current, patch)
    elif mt == "application/merge-patch+json":
        result = merge_patch(current, patch)
    elif mt == "application/json-patch+json":
        result = json_patch(current, patch)
    else:
        raise ApiError(
            415,
            f"the body of the request was in an unknown format - accepted media types include: "
            f"application/json-patch+json, application/merge-patch+json, "
            f"application/strategic-merge-patch+json (got {mt or 'none'})",
        )
    if not isinstance(result, dict):
        raise ApiError(422, "patch did not produce an object")
    return result
