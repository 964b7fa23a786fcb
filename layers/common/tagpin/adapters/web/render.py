"""The console's HTML: Jinja2 templates with autoescape on for every template (a string from a
registry, a cluster or a notification is always text), strict undefined names, and the static
assets (CSS, JS) served under names that carry their content's hash, so a page never loads a stale
one and they can be cached for good. No template has an inline script or style: the
Content-Security-Policy allows neither."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

HERE = Path(__file__).parent
TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


@dataclass(frozen=True)
class Asset:
    name: str  # e.g. console.3f2a1b9c0d4e.css
    body: str
    content_type: str


def when(epoch_ms: int | None) -> str:
    """Epoch milliseconds as UTC ISO 8601 (the <time> elements' datetime)."""
    if not epoch_ms:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_ms / 1000))


def short(digest: str | None) -> str:
    if not digest:
        return ""
    algorithm, _, hexdigits = digest.rpartition(":")
    return f"{algorithm}:{hexdigits[:12]}" if algorithm else digest[:19]


class Renderer:
    def __init__(self, templates: Path = HERE / "templates", static: Path = HERE / "static") -> None:
        self.assets: dict[str, Asset] = {}
        urls: dict[str, str] = {}
        for path in sorted(static.iterdir()):
            if path.suffix not in TYPES:
                continue
            body = path.read_text(encoding="utf-8")
            digest = hashlib.sha256(body.encode()).hexdigest()[:12]
            asset = Asset(f"{path.stem}.{digest}{path.suffix}", body, TYPES[path.suffix])
            self.assets[asset.name] = asset
            urls[path.name] = f"/console/static/{asset.name}"
        self.env = Environment(
            loader=FileSystemLoader(templates),
            autoescape=True,  # every template, whatever its name
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals["static"] = urls.__getitem__
        self.env.filters["when"] = when
        self.env.filters["short"] = short

    def page(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)

    def asset(self, name: str) -> Asset | None:
        return self.assets.get(name)
