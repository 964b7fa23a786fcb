"""Rollout notifications: the stack's SNS topic, and optionally Slack, Microsoft Teams and a
generic HTTP webhook (URLs from a secret named in the configuration).

One message per rollout event (a wave applied, a wave verified, a digest failed / rolled back):
the caller sends only when it won the event's conditional write in the state table
(``notices.claim``), so SQS retries and duplicate checks never notify twice. A
notification that cannot be delivered is logged and dropped: it never fails a rollout. Webhook
URLs are secrets (they carry tokens): never logged.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from tagpin.domain.config import NotificationSettings
from tagpin.ports.notify import RolloutEvent

logger = logging.getLogger(__name__)

WEBHOOK_KINDS = ("slack", "teams", "http")
TIMEOUT_S = 5.0
MAX_ANSWER = 64 * 1024  # bytes of a webhook's answer read (Slack answers "ok")


def slack_escape(text: str) -> str:
    """Slack's own escaping: what a registry or a cluster wrote cannot become a link or a mention."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(event: RolloutEvent) -> dict[str, Any]:
    """The text; an approval request also gets Approve / Reject buttons, whose clicks Slack sends to
    the app's interactivity URL (docs/approvals.md), naming the image, digest and wave decided."""
    text = slack_escape(event.text())
    if event.event != "awaiting_approval":
        return {"text": text}
    value = json.dumps(
        {"image": event.image, "digest": event.digest, "wave": event.wave}, separators=(",", ":")
    )
    button = {"type": "button", "value": value}
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text[:2900]}},
            {
                "type": "actions",
                "block_id": "tagpin-approval",
                "elements": [
                    button
                    | {
                        "action_id": "approve",
                        "style": "primary",
                        "text": {"type": "plain_text", "text": "Approve"},
                    },
                    button
                    | {
                        "action_id": "reject",
                        "style": "danger",
                        "text": {"type": "plain_text", "text": "Reject"},
                    },
                ],
            },
        ],
    }


def teams_payload(event: RolloutEvent) -> dict[str, Any]:
    """A message card (incoming webhooks and Workflows' "post to a channel" both accept it)."""
    colour = {"applied": "0078D7", "verified": "2EB886", "failed": "D13438", "rolled_back": "D13438"}
    return {
        "@type": "MessageCard",
        "@context": "https://schema.org/extensions",
        "summary": event.summary(),
        "themeColor": colour.get(event.event, "D29922"),
        "title": event.summary(),
        "text": "<br>".join(event.text().splitlines()[1:]),
    }


def http_payload(event: RolloutEvent) -> dict[str, Any]:
    return {"source": "tagpin", **asdict(event)}


PAYLOADS: dict[str, Callable[[RolloutEvent], dict[str, Any]]] = {
    "slack": slack_payload,
    "teams": teams_payload,
    "http": http_payload,
}


def post_json(url: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(  # noqa: S310 (https URLs from the operator's secret)
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310
        response.read(MAX_ANSWER)  # the status is the answer; the rest of the body is not read


class Notifier:
    def __init__(
        self,
        *,
        settings: Callable[[], NotificationSettings],
        sns: Any | None,
        topic_arn: str | None,
        secret: Callable[[str], dict[str, Any]],
        post: Callable[[str, dict[str, Any]], None] = post_json,
    ) -> None:
        self._settings = settings
        self._sns = sns
        self._topic = topic_arn
        self._secret = secret
        self._post = post

    def send(self, event: RolloutEvent) -> None:
        settings = self._settings()
        logger.info(
            "rollout event", extra={"event": event.event, "image": event.image, "digest": event.digest}
        )
        if settings.sns and self._sns is not None and self._topic:
            try:
                self._sns.publish(
                    TopicArn=self._topic,
                    Subject=event.summary()[:100],
                    Message=json.dumps(http_payload(event)),
                    MessageAttributes={"event": {"DataType": "String", "StringValue": event.event}},
                )
            except Exception as exc:  # a lost notification never fails a rollout
                logger.warning("SNS publish failed", extra={"error": f"{type(exc).__name__}: {exc}"})
        if settings.webhooks_secret:
            self._webhooks(settings.webhooks_secret, event)

    def _webhooks(self, secret_name: str, event: RolloutEvent) -> None:
        try:
            urls = self._secret(secret_name)
        except Exception as exc:
            logger.warning("notification secret unreadable", extra={"error": type(exc).__name__})
            return
        for kind in WEBHOOK_KINDS:
            url = urls.get(kind)
            if not isinstance(url, str) or not url.startswith(("https://", "http://")):
                continue
            try:
                self._post(url, PAYLOADS[kind](event))
            except Exception as exc:  # the URL is a secret: log the kind and the error type only
                logger.warning(
                    "notification webhook failed", extra={"kind": kind, "error": type(exc).__name__}
                )
