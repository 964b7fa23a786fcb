"""Just enough of the API server's protobuf encoding to read what kubectl sends as protobuf: the
self access and rules reviews (``kubectl auth can-i``). Answers are JSON, which client-go accepts.

The envelope is ``k8s\\x00`` + ``runtime.Unknown`` {typeMeta=1 {apiVersion=1, kind=2}, raw=2}; ``raw``
is the object's own message (generated.proto of k8s.io/api/authorization/v1).
"""

from __future__ import annotations

from .resources import ApiError, Obj

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"
_RESOURCE_FIELDS = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7


def fields(data: bytes) -> dict[int, list[bytes]]:
    """The length-delimited fields of one message by number (other wire types are skipped)."""
    out: dict[int, list[bytes]] = {}
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            size, i = _varint(data, i)
            out.setdefault(number, []).append(data[i : i + size])
            i += size
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _strings(data: bytes, names: dict[int, str]) -> Obj:
    found = fields(data)
    return {names[n]: found[n][-1].decode() for n in names if n in found}


def review_from_protobuf(body: bytes) -> Obj:
    """A ``SelfSubjectAccessReview`` or ``SelfSubjectRulesReview`` as JSON would carry it."""
    try:
        if not body.startswith(MAGIC):
            raise ValueError("no k8s protobuf envelope")
        unknown = fields(body[len(MAGIC) :])
        type_meta = _strings(unknown.get(1, [b""])[-1], {1: "apiVersion", 2: "kind"})
        raw = fields(unknown.get(2, [b""])[-1])
        spec_fields = fields(raw.get(2, [b""])[-1])
        spec: Obj = {}
        if type_meta.get("kind") == "SelfSubjectRulesReview":
            spec = _strings(raw.get(2, [b""])[-1], {1: "namespace"})
        elif 1 in spec_fields:
            spec["resourceAttributes"] = _strings(spec_fields[1][-1], _RESOURCE_FIELDS)
        elif 2 in spec_fields:
            spec["nonResourceAttributes"] = _strings(spec_fields[2][-1], {1: "path", 2: "verb"})
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"invalid protobuf body: {exc}") from None
    return type_meta | {"spec": spec}
