"""What a signature gate asks of a digest (docs/trust.md): how strictly (``SignatureMode``) and
whom keyless signatures may come from (``KeylessIdentity``). The verification itself is
``tagpin.ports.signatures``; the configuration of a gate is ``tagpin.domain.config.signatures``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field


class SignatureMode(StrEnum):
    """``off``: not checked. ``warn``: checked; a digest that fails is rolled anyway, and the
    failure recorded in history and logged. ``require``: a digest that fails is not rolled
    (blocked, with the reason)."""

    OFF = "off"
    WARN = "warn"
    REQUIRE = "require"


@dataclass(frozen=True)
class KeylessIdentity:
    """Who may sign keyless: the OIDC ``issuer`` of the certificate (exact) and its identity (the
    subject alternative name: an email, a URI such as a CI workflow's), exact or a regular
    expression that must match the whole identity."""

    issuer: Annotated[
        str,
        Field(
            description="The OIDC issuer the certificate names, exactly (e.g. "
            "`https://token.actions.githubusercontent.com`, `https://accounts.google.com`)."
        ),
    ]
    identity: Annotated[
        str,
        Field(
            description="The certificate's identity (subject alternative name): an email, or a URI "
            "such as `https://github.com/acme/web/.github/workflows/release.yml@refs/heads/main`."
        ),
    ]
    match: Annotated[
        Literal["exact", "regex"],
        Field(
            description="`exact`, or `regex`: `identity` is a regular expression matching the whole identity."
        ),
    ] = "exact"

    def __post_init__(self) -> None:
        if not self.issuer or not self.identity:
            raise ValueError("a keyless identity needs an issuer and an identity")
        if self.match == "regex":
            try:  # fail at configuration, not at the first signature
                re.compile(self.identity)
            except re.error as exc:
                raise ValueError(
                    f"keyless identity {self.identity[:80]!r} is not a regular expression: {exc}"
                ) from None

    def matches(self, issuer: str, identity: str) -> bool:
        if issuer != self.issuer:
            return False
        if self.match == "exact":
            return identity == self.identity
        return re.fullmatch(self.identity, identity) is not None
