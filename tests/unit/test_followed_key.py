"""``FollowedKey``: what tagpin follows, typed between modules, the same text at the edges."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from tagpin.domain.channels import MAX_KEY, ChannelKey, FollowedKey
from tagpin.domain.config import FollowedImage, Target
from tagpin.domain.messages import Change, parse_message
from tagpin.domain.moves import Move, Trigger
from tagpin.domain.refs import ImageRef

from tests.support.constants import D1, WEB

CHANNEL = "127.0.0.1:5000/demo/web@stable"


def test_a_followed_tag_is_its_canonical_reference_and_no_channel() -> None:
    key = FollowedKey.of(ImageRef.parse("127.0.0.1:5000/demo/web:stable@" + D1))  # the digest dropped
    assert key == WEB and isinstance(key, str) and key.channel is None
    assert key.repository.name == "127.0.0.1:5000/demo/web" and key.source(None) == WEB


def test_a_channel_key_is_no_image_reference() -> None:
    key = FollowedKey(CHANNEL)
    assert key.channel == ChannelKey.parse(CHANNEL) and key == FollowedKey.of(ChannelKey.parse(CHANNEL))
    assert key.repository.name == "127.0.0.1:5000/demo/web"
    assert key.source("1.4.2") == "127.0.0.1:5000/demo/web:1.4.2"
    with pytest.raises(ValueError, match="names the version"):
        key.source(None)


@pytest.mark.parametrize("text", ["", "ab", "x" * (MAX_KEY + 1), None, 7])
def test_what_is_no_key_is_refused(text: object) -> None:
    with pytest.raises(ValueError, match="followed tag or channel key"):
        FollowedKey(text)


def test_it_is_written_and_read_as_the_text_it_is() -> None:
    change = Change(move=Move(image=CHANNEL, digest=D1, observed_at=1, trigger=Trigger.POLL, tag="1.4.2"))
    assert isinstance(change.move.image, FollowedKey)
    body = json.loads(change.model_dump_json())
    assert body["move"]["image"] == body["image"] == CHANNEL
    read = parse_message(change.model_dump_json())
    assert isinstance(read, Change) and isinstance(read.move.image, FollowedKey) and read == change


def test_a_message_or_configuration_without_a_key_is_refused_naming_the_field() -> None:
    body = {"move": {"image": "ab", "digest": D1, "observed_at": 1, "trigger": "poll"}}
    with pytest.raises(ValidationError, match=r"move\.image\n.*followed tag or channel key"):
        parse_message(json.dumps(body))
    followed = FollowedImage(
        image="127.0.0.1:5000/demo/web", targets=[Target(cluster="c", name="web", container="app")]
    )
    assert isinstance(followed.image, FollowedKey) and followed.image == "127.0.0.1:5000/demo/web:latest"


def test_its_json_schema_is_a_strings() -> None:
    """The configuration's documented schema (docs generated from it) is what it was."""
    schema = FollowedImage.model_json_schema()["properties"]["image"]
    assert schema["type"] == "string" and "minLength" not in schema
