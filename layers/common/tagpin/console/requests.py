"""What the console reads from a request, bounded before it is read, and the errors it answers
with: a body at most so many bytes (checked before base64 is decoded: 413), a form of at most
``MAX_FIELDS`` fields of UTF-8 (else 400), and every query or form field that becomes (part of) a
DynamoDB key checked against DynamoDB's limits (``KEY_FIELDS``: a clear 400 naming the field,
where AWS would answer the function with a ValidationException, a 500; moto does not check them).
"""

from __future__ import annotations

import base64
from urllib.parse import parse_qsl

from tagpin.adapters.dynamodb.table import MAX_SORT_KEY

MAX_FORM = 16 * 1024  # bytes of a form body
MAX_FIELDS = 20
# Query and form fields that become (part of) a DynamoDB key, and their limit in bytes of UTF-8: a
# target id is a sort key (its hold's hint); an image too (its approval's hint), and "<image>#" a
# sort key's prefix (its index entries); a cursor is "i<shard>:" and an index entry's sort key.
KEY_FIELDS = {"id": MAX_SORT_KEY, "target": MAX_SORT_KEY, "image": MAX_SORT_KEY - 1, "ref": MAX_SORT_KEY - 1,
              "digest": MAX_SORT_KEY, "after": len("i00:") + MAX_SORT_KEY}  # fmt: skip


class HttpError(Exception):
    status = 500
    title = "Error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(HttpError):
    status, title = 400, "Bad Request"


class Unauthorized(HttpError):
    status, title = 401, "Unauthorized"


class Forbidden(HttpError):
    status, title = 403, "Forbidden"


class NotFound(HttpError):
    status, title = 404, "Not Found"


class PayloadTooLarge(HttpError):
    status, title = 413, "Payload Too Large"


def body_of(raw: str | None, base64_encoded: bool, limit: int) -> bytes:
    """A request's body, at most ``limit`` bytes (the HTTP API base64-encodes one that is not UTF-8)."""
    raw = raw or ""
    if len(raw) > 2 * limit:  # before decoding: base64 is 4/3 of the bytes
        raise PayloadTooLarge(f"The body is larger than {limit:,} bytes.")
    try:
        data = base64.b64decode(raw, validate=True) if base64_encoded else raw.encode()
    except (ValueError, UnicodeEncodeError):  # binascii.Error is a ValueError
        raise BadRequest("The body could not be read.") from None
    if len(data) > limit:
        raise PayloadTooLarge(f"The body is larger than {limit:,} bytes.")
    return data


def form(raw: str | None, base64_encoded: bool) -> dict[str, str]:
    """A form body's fields (the last of a repeated one), each key-shaped one checked."""
    data = body_of(raw, base64_encoded, MAX_FORM)
    try:
        pairs = parse_qsl(data.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("The form could not be read.") from None
    return {name: key_shaped(name, value) for name, value in pairs}


def key_shaped(name: str, value: str) -> str:
    """``value`` of a query or form field; those that become (part of) a DynamoDB key are checked
    against DynamoDB's limit on a sort key (an image and a target id are each one somewhere: the
    approvals' and the holds' hints), with a clear 400 instead of AWS's ValidationException."""
    limit = KEY_FIELDS.get(name)
    if limit is None:
        return value
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadRequest(f"{name}: not UTF-8 text.") from None
    if size > limit:
        raise BadRequest(
            f"{name}: {size:,} bytes; at most {limit:,} (DynamoDB's limit on a sort key, where it is kept)."
        )
    return value
