"""Google Artifact Registry / Container Registry through a Pub/Sub push subscription.

The registry publishes to the topic ``gcr``: ``{"action": "INSERT"|"DELETE", "digest":
"<host>/<project>/<repo>/<image>@sha256:...", "tag": "<host>/<project>/<repo>/<image>:<tag>"}``
(both full references; ``tag`` absent for digest-only uploads). A push subscription wraps it:
``{"message": {"data": <base64>, "messageId", "publishTime", "attributes"}, "subscription"}``
(``message_id``/``publish_time`` also occur). With payload unwrapping the body is the data itself
and the metadata comes in ``x-goog-pubsub-*`` headers. The message id is the delivery id.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from pydantic import AliasChoices, Field

from tagpin.adapters.webhooks import Payload, decode
from tagpin.domain.refs import ImageRef, InvalidReference
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError


class Message(Payload):
    data: str = ""
    message_id: str | None = Field(default=None, validation_alias=AliasChoices("messageId", "message_id"))
    publish_time: str | None = Field(
        default=None, validation_alias=AliasChoices("publishTime", "publish_time")
    )


class Envelope(Payload):
    message: Message | None = None
    # unwrapped payload: the registry's own fields at the top level
    action: str | None = None
    tag: str | None = None
    digest: str | None = None


class RegistryMessage(Payload):
    action: str
    tag: str | None = None
    digest: str | None = None


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    envelope = decode(Envelope, body)
    if envelope.message is not None:
        try:
            data = base64.b64decode(envelope.message.data, validate=True)
        except (binascii.Error, ValueError):
            raise WebhookError(400, "message.data: not valid base64") from None
        message = decode(RegistryMessage, data)
        delivery, when = envelope.message.message_id, envelope.message.publish_time
    else:
        if envelope.action is None:
            raise WebhookError(
                400, "expected a Pub/Sub push envelope ('message') or an unwrapped registry message"
            )
        message = RegistryMessage(action=envelope.action, tag=envelope.tag, digest=envelope.digest)
        delivery = headers.get("x-goog-pubsub-message-id")
        when = headers.get("x-goog-pubsub-publish-time")
    if message.action != "INSERT" or not message.tag:
        return []
    try:
        tagged = ImageRef.parse(message.tag)
        digested = ImageRef.parse(message.digest) if message.digest else None
    except InvalidReference as exc:
        raise WebhookError(400, f"message: {exc}") from None
    if tagged.tag is None or tagged.digest is not None:
        raise WebhookError(400, "message.tag: expected <host>/<path>:<tag>")
    digest = digested.digest if digested is not None and digested.name == tagged.name else None
    return [PushEvent(tagged.registry, tagged.repository, tagged.tag, digest, when or None, delivery or None)]
