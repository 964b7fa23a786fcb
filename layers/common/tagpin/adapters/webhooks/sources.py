"""The sources tagpin hears, each with its parser and its authentication: the one table.

Adding a registry means one parser module and one row here; the service has no per-source code.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from tagpin.adapters.webhooks import (
    acr,
    artifactory,
    distribution,
    dockerhub,
    ecr,
    gar,
    generic,
    github,
    harbor,
    nexus,
    quay,
)
from tagpin.adapters.webhooks.auth import (
    AnyOf,
    EventBridgeOnly,
    HmacSignature,
    JFrogEventAuth,
    PubSubOidc,
    Scheme,
    StaticHeader,
    UrlToken,
    load_secret,
)
from tagpin.ports.webhooks import Parser, Request, SourceOptions, WebhookError


@dataclass(frozen=True)
class Source:
    """A sender: its parser and its authentication scheme (``tagpin.ports.webhooks.Source``)."""

    parse: Parser
    auth: Scheme

    def authenticate(self, name: str, request: Request, secret: object) -> SourceOptions:
        loaded = load_secret(secret, self.auth, name)
        if loaded is None:
            raise WebhookError(
                401, f"no secret is configured for source {name!r}; refusing unauthenticated input"
            )
        self.auth.verify(request, loaded)
        return loaded.options


SOURCES: dict[str, Source] = {
    "distribution": Source(distribution.parse, StaticHeader()),
    "harbor": Source(harbor.parse, StaticHeader()),
    "acr": Source(acr.parse, StaticHeader()),
    "generic": Source(generic.parse, StaticHeader()),
    "dockerhub": Source(dockerhub.parse, UrlToken()),
    "quay": Source(quay.parse, UrlToken()),
    "github": Source(github.parse, HmacSignature("x-hub-signature-256", hashlib.sha256, prefix="sha256=")),
    "nexus": Source(nexus.parse, HmacSignature("x-nexus-webhook-signature", hashlib.sha1)),
    "artifactory": Source(artifactory.parse, JFrogEventAuth()),
    "gar": Source(gar.parse, AnyOf((PubSubOidc(), UrlToken()))),
    "ecr": Source(ecr.parse, EventBridgeOnly()),
}
