"""The references a poll resolves (``tagpin.usecases.poll``), parsed as its chunks start."""

from __future__ import annotations

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage
from tagpin.domain.refs import ImageRef


class PollRefs(dict[FollowedKey, ImageRef]):
    """What a run resolves for each image it polls (``polled``: every one of them): a version
    channel's head, set when chosen (``refs[image] = head``: that alone makes it polled); a followed
    tag's reference, the run before's, else parsed when first asked for (as its chunk starts), so
    that the first requests do not wait for every new tag's parse (about 8 ms at 1,000 tags on 2
    shared cores: a container's first poll, and ``bench/poll.py``'s, whose warm poll parsed 20 of
    its 1,000)."""

    def __init__(self, tags: dict[FollowedKey, FollowedImage], parsed: dict[FollowedKey, ImageRef]) -> None:
        """``parsed``: the tags' references parsed before, kept across runs; each parsed here is
        added to it."""
        super().__init__()
        self._tags, self._parsed = tags, parsed

    @property
    def polled(self) -> list[FollowedKey]:
        """Every image the run polls: the followed tags, then each channel whose head was set. Kept
        in one place, the keys: a head set is polled, with no list beside the dict to keep in step."""
        return [*self._tags, *(image for image in self if image not in self._tags)]

    def __missing__(self, image: FollowedKey) -> ImageRef:
        ref = self._parsed.get(image)
        if ref is None:
            ref = self._parsed[image] = self._tags[image].ref  # KeyError: an image the run does not poll
        self[image] = ref
        return ref
