"""Platforms: what an image provides (an index's entries, or a single manifest's config) and what a
cluster's nodes run, compared before a rollout.

A platform is ``os/architecture[/variant]`` (``linux/amd64``, ``linux/arm64/v8``), as OCI indexes
and the nodes' ``status.nodeInfo`` spell it. A node's variant is not reported by Kubernetes, so a
requirement without a variant is met by an entry of any variant of that os and architecture;
``arm64`` is ``arm64/v8`` and ``amd64`` has no variant (the OCI image spec's normalisation).
BuildKit's attestation entries (``unknown/unknown``) are no platform.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

_PART = re.compile(r"^[a-z0-9_.-]{1,32}$")


@dataclass(frozen=True, order=True)
class Platform:
    os: str
    architecture: str
    variant: str = ""

    @classmethod
    def parse(cls, text: str) -> Platform:
        parts = text.strip().lower().split("/")
        if len(parts) not in (2, 3) or not all(_PART.fullmatch(p) for p in parts):
            raise ValueError(
                f"{text!r} is not a platform: expected os/architecture[/variant], e.g. linux/arm64"
            )
        return cls(*parts).normalised()

    def normalised(self) -> Platform:
        variant = self.variant
        if self.architecture == "arm64" and variant == "v8":
            variant = ""
        if self.architecture == "amd64" and variant == "v1":
            variant = ""
        return Platform(self.os, self.architecture, variant)

    def provided_by(self, provided: Iterable[Platform]) -> bool:
        """Met by one of ``provided``: the same os and architecture, and the variant when this one
        names one."""
        return any(
            p.os == self.os
            and p.architecture == self.architecture
            and (not self.variant or p.variant == self.variant)
            for p in provided
        )

    def __str__(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)


def index_platforms(body: bytes) -> frozenset[Platform] | None:
    """The platforms an image index (or Docker manifest list) provides; None when ``body`` is not
    an index (a single-platform manifest: its config says, ``config_platform``)."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("manifests"), list):
        return None
    found: set[Platform] = set()
    for entry in document["manifests"]:
        platform = entry.get("platform") if isinstance(entry, dict) else None
        if not isinstance(platform, dict):
            continue
        os_, arch = str(platform.get("os", "")), str(platform.get("architecture", ""))
        if not os_ or not arch or (os_, arch) == ("unknown", "unknown"):
            continue
        try:
            found.add(
                Platform.parse("/".join(p for p in (os_, arch, str(platform.get("variant") or "")) if p))
            )
        except ValueError:
            continue
    return frozenset(found)


def config_platform(body: bytes) -> Platform | None:
    """The platform of a single-platform image, from its config blob (``os``, ``architecture``,
    ``variant``)."""
    try:
        document = json.loads(body)
        text = "/".join(
            p for p in (document.get("os"), document.get("architecture"), document.get("variant")) if p
        )
        return Platform.parse(text)
    except (ValueError, AttributeError, TypeError, RecursionError):
        return None


def missing(required: Iterable[Platform], provided: Iterable[Platform]) -> list[Platform]:
    """The required platforms ``provided`` does not meet, sorted."""
    offered = list(provided)
    return sorted(p for p in set(required) if not p.provided_by(offered))
