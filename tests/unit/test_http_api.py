"""The webhook's HTTP API routing (tagpin.adapters.http_api) answers as powertools'
``APIGatewayHttpResolver``, which it replaced to keep the ``event_handler`` package out of the
webhook's cold start: the same requests reach the route with the same path parameter, headers,
query and body bytes, and every other request gets the resolver's 404, response for response."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from hypothesis import given, settings
from hypothesis import strategies as st
from tagpin.adapters.http_api import Route, http_request, http_response, not_found

CONTEXT = SimpleNamespace(function_name="webhook", aws_request_id="r")


def resolver_answer(event: dict[str, Any]) -> dict[str, Any]:
    resolver = APIGatewayHttpResolver()

    @resolver.post("/webhooks/<source>")
    def receive(source: str) -> Response[str]:
        current = resolver.current_event
        raw = current.body or ""
        body = base64.b64decode(raw) if current.is_base64_encoded else raw.encode()
        seen = [source, dict(current.headers), current.query_string_parameters or {}, body.hex()]
        return Response(202, "application/json", json.dumps(seen))

    return resolver.resolve(event, CONTEXT)  # type: ignore[arg-type]


def our_answer(event: dict[str, Any]) -> dict[str, Any]:
    request = http_request(event)
    source = Route("POST", "/webhooks/").match(request)
    if source is None:
        return not_found()
    seen = [source, request.headers, request.query, request.body.hex()]
    return http_response(202, json.dumps(seen))


def event(
    method: str,
    raw_path: str,
    stage: str = "$default",
    body: str | None = "{}",
    encoded: bool = False,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
) -> dict[str, Any]:
    shaped: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": "",
        "requestContext": {"http": {"method": method, "path": raw_path}, "stage": stage, "requestId": "1"},
        "body": body,
        "isBase64Encoded": encoded,
    }
    if headers is not None:
        shaped["headers"] = headers
    if query is not None:
        shaped["queryStringParameters"] = query
    return shaped


EXAMPLES = [
    event("POST", "/webhooks/github", headers={"X-Hub-Signature-256": "sha256=ab", "content-type": "x"}),
    event("post", "/webhooks/gar", query={"token": "t"}),
    event("POST", "/webhooks/distribution", body=base64.b64encode(b"\xff\x00{}").decode(), encoded=True),
    event("POST", "/webhooks/github", body=None),
    event("POST", "/prod/webhooks/quay", stage="prod"),
    event("POST", "/webhooks/quay", stage="prod"),
    event("GET", "/webhooks/github"),
    event("OPTIONS", "/webhooks/github"),
    event("POST", "/webhooks/"),
    event("POST", "/webhooks/a/b"),
    event("POST", "/webhooks/github/"),
    event("POST", "/other"),
    event("POST", "/webhooks/x%20y"),
    event("POST", "/webhooks/a%2Fb"),
    event("POST", "/webhooks/é"),
    event("POST", "/webhooks/x\n"),
    event("POST", "/webhooks/tab\t"),
]


def test_the_route_answers_as_powertools_resolver_did() -> None:
    for example in EXAMPLES:
        assert our_answer(example) == resolver_answer(example), example
    routed = our_answer(EXAMPLES[0])
    assert routed["statusCode"] == 202
    headers = {"x-hub-signature-256": "sha256=ab", "content-type": "x"}
    assert json.loads(routed["body"])[:2] == ["github", headers]
    assert our_answer(EXAMPLES[6]) == {
        "statusCode": 404,
        "body": '{"statusCode":404,"message":"Not found"}',
        "isBase64Encoded": False,
        "headers": {"Content-Type": "application/json"},
        "cookies": [],
    }


def test_an_event_that_is_not_an_http_api_request_fails_as_before() -> None:
    for shaped in ({}, {"rawPath": "/webhooks/x"}, {"requestContext": {"stage": "$default"}}):
        for answer in (our_answer, resolver_answer):
            try:
                answer(shaped)
            except KeyError:
                continue
            raise AssertionError(f"{answer.__name__} answered {shaped}")


PATH_TEXT = st.text(alphabet=st.sampled_from("/abwe-._~%2F é?#\n\t:@+&$[]{}|^<>"), max_size=24)


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(["POST", "post", "GET", "PUT", "OPTIONS"]),
    prefix=st.sampled_from(["/webhooks/", "/webhooks", "/prod/webhooks/", "/", "//webhooks/", ""]),
    rest=PATH_TEXT,
    stage=st.sampled_from(["$default", "prod", ""]),
    headers=st.dictionaries(st.sampled_from(["A", "a", "X-Sig", "x-sig"]), st.text(max_size=4), max_size=3),
    query=st.none() | st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    body=st.binary(max_size=16),
    encoded=st.booleans(),
)
def test_any_request_is_routed_as_powertools_routed_it(
    method: str,
    prefix: str,
    rest: str,
    stage: str,
    headers: dict[str, str],
    query: dict[str, str] | None,
    body: bytes,
    encoded: bool,
) -> None:
    text = base64.b64encode(body).decode() if encoded else body.decode("latin-1")
    shaped = event(method, prefix + rest, stage, text, encoded, headers, query)
    assert our_answer(shaped) == resolver_answer(shaped)
