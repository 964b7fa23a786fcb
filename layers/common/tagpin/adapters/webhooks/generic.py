"""A small JSON format for CI pipelines and anything else that can POST after a push.

One object, or a list of up to 100::

    {"image": "registry.example.com/team/web:1.4",          # required; a tag (default latest)
     "digest": "sha256:...",                                  # optional hint (also image@digest)
     "id": "build-4711",                                      # optional delivery id (dedup)
     "time": "2026-01-01T00:00:00Z"}                          # optional

Authentication: ``Authorization: Bearer <token>`` (static secret).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, RootModel

from tagpin.adapters.webhooks import Payload, decode
from tagpin.domain.refs import ImageRef, InvalidReference
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError

MAX_IMAGES = 100


class GenericPush(Payload):
    image: str = Field(max_length=600)
    digest: str | None = Field(default=None, max_length=200)
    id: str | None = Field(default=None, max_length=200)
    time: str | None = Field(default=None, max_length=64)


class GenericBody(RootModel[GenericPush | list[GenericPush]]):
    pass


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    parsed = decode(GenericBody, body).root
    pushes = parsed if isinstance(parsed, list) else [parsed]
    if len(pushes) > MAX_IMAGES:
        raise WebhookError(400, f"at most {MAX_IMAGES} images per request")
    events = []
    for index, push in enumerate(pushes):
        try:
            ref = ImageRef.parse(push.image)
        except InvalidReference as exc:
            raise WebhookError(400, f"{index}.image: {exc}") from None
        if ref.tag is None:
            raise WebhookError(400, f"{index}.image: a tag is needed (tagpin follows tags)")
        events.append(
            PushEvent(ref.registry, ref.repository, ref.tag, push.digest or ref.digest, push.time, push.id)
        )
    return events
