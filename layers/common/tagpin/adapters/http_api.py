"""The API Gateway HTTP API event (payload format 2.0) as a typed request, and the response it
expects: for a function with one route (the webhook's ``POST /webhooks/{source}``).

Why not powertools' ``APIGatewayHttpResolver``: importing it runs the ``event_handler``
package's ``__init__``, which loads AppSync, Bedrock agent and OpenAPI support and asyncio
(about a tenth of the webhook's cold start) for one route. The matching here is the resolver's
own, kept identical: the method compared upper-cased, the stage stripped from ``rawPath`` when it
is not ``$default``, a path parameter of URI-safe characters (``_NAMED_GROUP_BOUNDARY_PATTERN`` in
``aws_lambda_powertools.event_handler.api_gateway``), and its 404 body for anything else.
``tests/unit/test_http_api.py`` holds both to the same answers.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# powertools' characters of a path parameter: RFC 3986 unreserved and sub-delims, ``:@``, percent
# escapes and the unsafe characters API Gateway passes through, and word characters.
_PARAMETER = r"[-._~()'!*:@,;=+&$%<> \[\]{}|^\w]+"
NOT_FOUND_BODY = json.dumps({"statusCode": 404, "message": "Not found"}, separators=(",", ":"))


@dataclass(frozen=True)
class HttpRequest:
    """One request as the function sees it: header names lower-cased, the body as sent."""

    method: str  # upper-cased
    path: str  # without the stage
    headers: dict[str, str]
    query: dict[str, str]
    body: bytes  # the exact bytes the sender sent (HMAC and size checks need them)


def http_request(event: Mapping[str, Any]) -> HttpRequest:
    """The request of an HTTP API (2.0) event; ``KeyError`` when it is not one (no ``rawPath`` or
    ``requestContext``), as powertools' resolver raised."""
    context = event["requestContext"]
    path: str = event["rawPath"]
    stage = context["stage"]
    if stage != "$default":
        path = path[len("/" + stage) :]
    raw = event.get("body") or ""
    return HttpRequest(
        method=str(context["http"]["method"]).upper(),
        path=path,
        headers={k.lower(): v for k, v in (event.get("headers") or {}).items()},
        query=dict(event.get("queryStringParameters") or {}),
        body=base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode(),
    )


class Route:
    """``METHOD /prefix/<name>``: one path parameter at the end, matched as powertools matches it."""

    def __init__(self, method: str, prefix: str) -> None:
        self.method = method.upper()
        self._rule = re.compile(f"^{re.escape(prefix)}(?P<parameter>{_PARAMETER})$")

    def match(self, request: HttpRequest) -> str | None:
        """The path parameter when ``request`` is for this route, else None."""
        if request.method != self.method:
            return None
        found = self._rule.match(request.path)
        return found["parameter"] if found else None


def http_response(status: int, body: str, content_type: str = "application/json") -> dict[str, Any]:
    """The HTTP API (2.0) response, in the shape powertools' resolver gave it."""
    return {
        "statusCode": status,
        "body": body,
        "isBase64Encoded": False,
        "headers": {"Content-Type": content_type},
        "cookies": [],
    }


def not_found() -> dict[str, Any]:
    """powertools' answer to a request no route matches."""
    return http_response(404, NOT_FOUND_BODY)
