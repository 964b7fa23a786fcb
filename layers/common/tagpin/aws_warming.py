"""An AWS operation rehearsed without sending it: botocore's per-operation setup on first use (the
operation's model and its shapes, the events' handler lookups, the endpoint ruleset's resolution,
the request's signing, the answer's parsing) done at a container's start, so that the first event's
calls cost what a warm one's do (issue 26; measured: ``tests/integration/test_warmed_first_call.py``).

How: ``install`` registers one ``before-send`` handler on a client when it is created
(``tagpin.wiring.aws``). botocore documents ``before-send`` as the last step before the HTTP request:
a handler that returns a response stops the request there and that response is parsed as if it
came from AWS. The handler answers only while its own thread is rehearsing (``rehearse``: a
thread-local flag), with a ``200`` (every member of the operation's answer in the JSON protocol,
``sample``; empty in the query protocol); for every other thread, and at any other time, it returns
``None`` and the request is sent. So the clients that a process's containers share (the local
stack's thread containers; botocore's clients are thread safe) keep sending every other thread's
requests, and a rehearsal never reaches AWS: no call, no cost, no IAM permission needed, nothing
written. botocore's ``Stubber`` was not used: it answers for every thread while active, and skips
the signing and the parsing (it answers at ``before-call``). Registered first, the rehearsal's
answer is the one used; botocore still calls the event's other handlers, so under moto's in-process
mock (unit tests) moto also handles a rehearsed request (its server, the local stack's, never sees
one).

The first connections are not opened here: a rehearsal sends nothing, and opening one without a
request needs urllib3's private pool methods. Measured with ``tagpin_local.firstcall`` (its
``connections``): on the local stack's in-process moto, which closes each connection after its
answer, a warmed webhook's check opens 7, its first as its later ones; moto in a process of its own
(``tagpin_local.moto_server``) keeps them open, so there a first call opens what a later one
reuses."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

logger = logging.getLogger(__name__)

_REHEARSING = threading.local()
_INSTALLED: weakref.WeakSet[Any] = weakref.WeakSet()
HANDLER_ID = "tagpin-rehearsal"
# An empty answer (botocore parses it to {}) in each protocol that has one: its body (``{op}``: the
# operation's name) and its type.
_EMPTY = {
    "json": ("{{}}", "application/x-amz-json-1.0"),
    "query": ("<{op}Response><{op}Result></{op}Result></{op}Response>", "text/xml"),
}


class _Body:
    """The raw body botocore's ``AWSResponse`` reads its content from."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._content


def _answer(request: Any, event_name: str, **_: Any) -> Any:
    """``before-send``: a 200 while this thread rehearses (its answer's every member filled in the
    JSON protocol, ``sample``; empty in the others); otherwise nothing (sent)."""
    protocol = getattr(_REHEARSING, "protocol", None)
    if protocol is None:
        return None
    from botocore.awsrequest import AWSResponse

    body, content_type = _EMPTY[protocol]
    operation = event_name.rsplit(".", 1)[-1]  # before-send.<service>.<operation>
    content = getattr(_REHEARSING, "content", None) or body.format(op=operation).encode()
    return AWSResponse(request.url, 200, {"content-type": content_type}, _Body(content))


def install(client: Any) -> Any:
    """Let ``client``'s operations be rehearsed (once per client: a second call replaces nothing)."""
    client.meta.events.register_first("before-send", _answer, unique_id=HANDLER_ID)
    _INSTALLED.add(client)
    return client


_HOLDERS = {"structure", "list", "map"}


def placeholder(
    shape: Any, given: Mapping[str, Any] | None = None, depth: int = 0, *, every: bool = False
) -> Any:
    """A value ``shape`` accepts (its required members filled, ``given`` over them at the top).
    ``every``: its members that hold others too (structures, lists, maps; a tagged union's first
    member), a list's item and a map's entry, down to 6 levels: serializing it walks each of the
    input's shapes in botocore's model, resolved once a shape (an operation's
    ``ExpressionAttributeValues`` were left to its first real call). Not its optional scalars: an
    ``IndexName`` would name another resource than the call's (the suite's IAM check reads it)."""
    kind = shape.type_name
    deep = depth < (6 if every else 8)
    if kind == "structure":
        names = list(shape.required_members)
        if every and shape.is_tagged_union:
            names = list(shape.members)[:1]
        elif every:
            names += [n for n, m in shape.members.items() if n not in names and m.type_name in _HOLDERS]
        value = {
            name: placeholder(shape.members[name], None, depth + 1, every=every) for name in names if deep
        }
        return value | dict(given or {})
    if kind == "list":
        filled = shape.metadata.get("min") or (every and deep)
        return [placeholder(shape.member, None, depth + 1, every=every)] if filled else []
    if kind == "map":
        return {"x": placeholder(shape.value, None, depth + 1, every=every)} if every and deep else {}
    if kind in {"integer", "long", "float", "double"}:
        return max(0, shape.metadata.get("min", 0))
    if kind == "boolean":
        return False
    if kind == "blob":
        return b"x"
    if kind == "timestamp":
        return 0
    enum = shape.metadata.get("enum")
    return enum[0] if enum else "x" * max(1, shape.metadata.get("min", 1))


def sample(shape: Any, depth: int = 0) -> Any:
    """An answer's value of ``shape`` with each of its members (a tagged union's first; nothing
    deeper than 6 levels), as a JSON protocol carries it: parsing it resolves each of the answer's
    shapes in botocore's model (``_resolve_shape_ref``, once a shape), which an empty answer left to
    the first real one (measured: 81 shapes at a warmed webhook's first check, 0 at its third)."""
    if depth > 6:
        return None
    kind = shape.type_name
    if kind == "structure":
        members = list(shape.members.items())[:1] if shape.is_tagged_union else shape.members.items()
        found = {name: sample(member, depth + 1) for name, member in members}
        return {name: value for name, value in found.items() if value is not None}
    if kind == "list":
        item = sample(shape.member, depth + 1)
        return [] if item is None else [item]
    if kind == "map":
        value = sample(shape.value, depth + 1)
        return {} if value is None else {"x": value}
    scalars = {"integer": 0, "long": 0, "float": 0.0, "double": 0.0, "boolean": False, "timestamp": 0}
    return scalars.get(kind, "eA==" if kind == "blob" else "x")  # a blob: base64


@contextlib.contextmanager
def rehearsing(protocol: str, content: bytes | None = None) -> Iterator[None]:
    outer = getattr(_REHEARSING, "protocol", None), getattr(_REHEARSING, "content", None)
    _REHEARSING.protocol, _REHEARSING.content = protocol, content
    try:
        yield
    finally:
        _REHEARSING.protocol, _REHEARSING.content = outer


def rehearse(client: Any, operation: str, params: Mapping[str, Any]) -> bool:
    """Call ``operation`` (``SendMessage``) on ``client`` with ``params`` over placeholders for its
    other required parameters, answered in this thread by an empty 200 instead of AWS: its whole
    path in botocore runs once, nothing is sent. False when it could not be rehearsed (a client
    without ``install``, a protocol whose answers cannot be empty, a refused parameter): the first
    real call sets it up, as before."""
    model = client.meta.service_model
    protocol = model.protocol
    if protocol not in _EMPTY or client not in _INSTALLED:
        logger.debug("warming: %s.%s cannot be rehearsed", model.service_name, operation)
        return False
    operation_model = model.operation_model(operation)
    input_shape = operation_model.input_shape
    arguments = placeholder(input_shape, params, every=True) if input_shape else {}
    output = operation_model.output_shape
    content = json.dumps(sample(output)).encode() if protocol == "json" and output else None
    try:
        with rehearsing(protocol, content):
            getattr(client, _method(client, operation))(**arguments)
    except Exception as exc:  # a rehearsal is best effort: the first real call pays it
        logger.debug("warming: %s.%s not rehearsed: %r", model.service_name, operation, exc)
        return False
    return True


def _method(client: Any, operation: str) -> str:
    """The client's method name of ``operation`` (``SendMessage``: ``send_message``)."""
    return str(next(m for m, api in client.meta.method_to_api_mapping.items() if api == operation))
