"""Amazon ECR through EventBridge: ``ECR Image Action`` events (not HTTP).

The rule in template.yaml delivers ``{"source": "aws.ecr", "detail-type": "ECR Image Action",
"account", "region", "id", "time", "detail": {"action-type": "PUSH", "result": "SUCCESS",
"repository-name", "image-tag", "image-digest"}}`` straight to the webhook function; EventBridge
is authorised by IAM (the function's resource policy), so there is no HTTP authentication.
Pushes without a tag (children of a multi-arch image) and failed pushes are dropped. The pull
host is ``<account>.dkr.ecr.<region>.amazonaws.com`` (``.amazonaws.com.cn`` in China regions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from tagpin.adapters.webhooks import Payload, decode
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError

SOURCE = "aws.ecr"
DETAIL_TYPE = "ECR Image Action"


class Detail(Payload):
    action_type: str = Field(alias="action-type")
    result: str | None = None
    repository_name: str = Field(alias="repository-name")
    image_tag: str | None = Field(default=None, alias="image-tag")
    image_digest: str | None = Field(default=None, alias="image-digest")


class EcrImageAction(Payload):
    id: str | None = None
    source: str
    detail_type: str = Field(alias="detail-type")
    account: str
    region: str
    time: str | None = None
    detail: Detail


def is_ecr_event(event: Mapping[str, Any]) -> bool:
    """The shape of an EventBridge ECR event (used to route the Lambda invocation)."""
    return event.get("source") == SOURCE and "detail-type" in event and "detail" in event


def registry_host(account: str, region: str) -> str:
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{suffix}"


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    event = decode(EcrImageAction, body)
    if event.source != SOURCE or event.detail_type != DETAIL_TYPE:
        raise WebhookError(400, f"expected an {DETAIL_TYPE!r} event from {SOURCE}")
    detail = event.detail
    if detail.action_type != "PUSH" or detail.result != "SUCCESS" or not detail.image_tag:
        return []
    if (
        not (event.account.isdigit() and len(event.account) == 12)
        or not event.region.replace("-", "").isalnum()
    ):
        raise WebhookError(400, "account/region: not an AWS account id and region")
    host = registry_host(event.account, event.region)
    return [
        PushEvent(host, detail.repository_name, detail.image_tag, detail.image_digest, event.time, event.id)
    ]
