"""The webhook's keys: a delivery's claim key, untrusted text made printable, the correlation id a
change carries, and the followed ones among a delivery's tags (``tagpin.usecases.webhook``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage
from tagpin.usecases.followed import Followed

ID_LIMIT = 200  # characters of a sender's delivery id that are kept


def delivery_key(source: str, delivery_id: str, image: str) -> str:
    """Fixed length whatever the sender put in the id; one source cannot use up another's ids.
    Any string hashes (a lone surrogate included: ``surrogatepass`` keeps distinct ids distinct)."""
    return hashlib.sha256(f"{source}\0{delivery_id}\0{image}".encode("utf-8", "surrogatepass")).hexdigest()


def printable(text: str, limit: int = ID_LIMIT) -> str:
    """Untrusted text made safe for every place it goes next (a JSON body, a DynamoDB attribute, a
    log line, a notification): lone surrogates as their escapes, at most ``limit`` characters."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:limit]


def select(
    followed: Mapping[FollowedKey, FollowedImage], images: Iterable[FollowedKey]
) -> Mapping[FollowedKey, FollowedImage]:
    """The followed ones among ``images``: one lookup for the whole delivery (``Followed.select``;
    a plain mapping, the configuration's, is looked up in memory)."""
    if isinstance(followed, Followed):
        return followed.select(images)
    return {image: f for image in images if (f := followed.get(image)) is not None}


def event_correlation(request_id: str | None, source: str, delivery_id: str | None) -> str:
    """The correlation id a webhook-triggered change carries to the consumer's logs and the audit
    trail: which webhook (source), the sender's delivery id and the API request id, e.g.
    ``webhook:github/72d3162e-.../Xyz1gHhIAMEabc=``."""
    parts = [f"webhook:{source}", *(p for p in (delivery_id, request_id) if p)]
    return "/".join(part[:100] for part in parts)[:256]
