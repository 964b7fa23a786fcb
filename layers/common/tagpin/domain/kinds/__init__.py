"""The workload kinds tagpin rolls: one module per kind in this package, each holding its
``PROFILE`` (``tagpin.domain.kinds.profile``). They are found here, once, at import: ``Kind`` (the
configuration's vocabulary) and ``PROFILES`` are built from them, so adding a kind is adding its
module (and its lines in docs/rbac.yaml), and a kind without a profile cannot be named.

``Kind`` is a ``StrEnum`` whose members are the profiles' kinds (``Kind.DEPLOYMENT`` is
``"Deployment"``). The type checker sees it without members: code outside this package never
names one kind, it asks the kind's profile.
"""

from __future__ import annotations

import importlib
import pkgutil
from enum import StrEnum
from typing import TYPE_CHECKING

from tagpin.domain.kinds.profile import Health, ImageChange, PatchType, Profile, Progress

__all__ = [
    "DEFAULT_KIND",
    "PROFILES",
    "Health",
    "ImageChange",
    "Kind",
    "PatchType",
    "Profile",
    "Progress",
    "UnknownKind",
    "profile_of",
]


class UnknownKind(ValueError):
    """A kind no profile describes: refused, never read with another kind's rules."""


def _discover() -> tuple[Profile, ...]:
    found: list[Profile] = []
    for module in pkgutil.iter_modules(__path__):
        if module.name == "profile" or module.name.startswith("_"):
            continue
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        profile = getattr(loaded, "PROFILE", None)
        if not isinstance(profile, Profile):
            raise TypeError(f"{loaded.__name__} holds no PROFILE (a tagpin.domain.kinds.Profile)")
        found.append(profile)
    kinds = [p.kind for p in found]
    if len(set(kinds)) != len(kinds) or len({p.order for p in found}) != len(found):
        raise TypeError(f"two profiles share a kind or an order: {sorted(kinds)}")
    return tuple(sorted(found, key=lambda p: p.order))


PROFILES: tuple[Profile, ...] = _discover()
_BY_KIND = {p.kind: p for p in PROFILES}


class _Kind(StrEnum):
    """A workload kind (members: one per profile)."""

    @property
    def profile(self) -> Profile:
        return _BY_KIND[self.value]

    @property
    def custom(self) -> bool:
        """A custom resource: served only where its CRD is installed, and granted to tagpin only
        by a docs/rbac.yaml that knows it."""
        return self.profile.custom


if TYPE_CHECKING:
    Kind = _Kind
else:
    Kind = _Kind("Kind", [(p.kind.upper(), p.kind) for p in PROFILES], module=__name__)

# a target names no kind: a Deployment (the configuration's default)
DEFAULT_KIND: Kind = Kind("Deployment")


def profile_of(kind: str) -> Profile:
    """The profile of ``kind`` (a ``Kind`` or its name); ``UnknownKind`` for any other."""
    profile = _BY_KIND.get(str(kind))
    if profile is None:
        known = ", ".join(p.kind for p in PROFILES)
        raise UnknownKind(f"unknown workload kind {str(kind)!r}: tagpin knows {known}")
    return profile
