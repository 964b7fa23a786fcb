"""The events AWS delivers to the functions, as the local runtime builds them
(:mod:`tagpin_local.lambda_runtime`): an HTTP API v2 request, an SQS batch, an EventBridge schedule,
and the failure record of an asynchronous invocation that failed every attempt."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime
from typing import Any

from tagpin.domain.deadletters import FAILURE_DETAIL_TYPE

ACCOUNT = "123456789012"
REGION = "us-east-1"


def _now() -> datetime:
    return datetime.now(UTC)


def http_api_event(
    method: str,
    path: str,
    query: str,
    headers: dict[str, str],
    body: bytes,
    source_ip: str,
    route: str,
    claims: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API payload v2.0 event, as the real service builds it: the ``Cookie``
    header becomes the ``cookies`` list; ``claims``: what a JWT authorizer passes on
    (``requestContext.authorizer.jwt``)."""
    cookies = [
        c.strip()
        for name, value in headers.items()
        if name.lower() == "cookie"
        for c in str(value).split(";")
        if c.strip()
    ]
    headers = {k: v for k, v in headers.items() if k.lower() != "cookie"}
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    now = _now()
    params: dict[str, str] = {}
    template = route.split(" ", 1)[1].strip("/").split("/")
    actual = path.strip("/").split("/")
    if template[-1].endswith("+}") and len(actual) >= len(template):  # a greedy {proxy+}
        actual = [*actual[: len(template) - 1], "/".join(actual[len(template) - 1 :])]
    if len(template) == len(actual):
        params = {t[1:-1].rstrip("+"): a for t, a in zip(template, actual, strict=True) if t.startswith("{")}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route,
        "rawPath": path,
        "rawQueryString": query,
        "headers": {k.lower(): v for k, v in headers.items()},
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "local",
            "domainName": headers.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": route,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "pathParameters": params,
        "body": text,
        "isBase64Encoded": encoded,
    }
    if query:
        from urllib.parse import parse_qsl

        event["queryStringParameters"] = dict(parse_qsl(query))
    if cookies:
        event["cookies"] = cookies
    if claims is not None:
        event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return event


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The event Lambda's SQS poller delivers for messages from ``receive_message``."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": dict(m.get("Attributes", {})),
                "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


def scheduled_event(rule: str = "tagpin-poll") -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": _now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{rule}"],
        "detail": {},
    }


def failure_event(
    function_name: str, request: dict[str, Any], error: Exception, attempts: int
) -> dict[str, Any]:
    """What Lambda puts on the default event bus for an asynchronous invocation that failed every
    attempt (an ``OnFailure`` destination of type EventBridge): the invocation record in ``detail``."""
    function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function_name}:$LATEST"
    now = _now()
    request_id = str(uuid.uuid4())
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": FAILURE_DETAIL_TYPE,
        "source": "lambda",
        "account": ACCOUNT,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default", function_arn],
        "detail": {
            "version": "1.0",
            "timestamp": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "requestContext": {
                "requestId": request_id,
                "functionArn": function_arn,
                "condition": "RetriesExhausted",
                "approximateInvokeCount": attempts,
            },
            "requestPayload": request,
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                "functionError": "Unhandled",
            },
            "responsePayload": {
                "errorMessage": str(error),
                "errorType": type(error).__name__,
                "requestId": request_id,
                "stackTrace": [],
            },
        },
    }
