"""List a repository's tags: ``GET /v2/<name>/tags/list``, page by page, bounded.

What registries do (and what this module copes with):

- the OCI distribution spec: ``?n=<page size>&last=<tag>``, tags in lexical order, and the next page
  in an RFC 5988 ``Link: <url>; rel="next"`` header, which clients should follow when present; a
  registry may serve fewer than ``n`` tags per page when it sends a Link (opencontainers/
  distribution-spec#470), and may answer 400 to an ``n`` it does not accept;
- registries that cap the page size below ``n`` (GHCR 100 by default, Quay 50), with a Link whose
  query is opaque (Quay's ``next_page`` cursor): the Link is followed verbatim, and a page shorter
  than ``n`` does not end the listing while a Link says there is more;
- registries that ignore ``n`` and ``last`` and send every tag in one page, unsorted, without a
  Link (CNCF distribution 2.x, distribution/distribution#1936; GCR): a page longer than ``n``, or
  any page without a Link, is the end;
- registries that paginate by ``last`` without a Link: a page of exactly ``n`` tags without a Link
  is followed by ``?n=<n>&last=<its last tag>``; a page that brings no new tag ends the listing
  (the registry ignores ``last``).

Bounds (``TagLimits``): at most ``max_tags`` tags and ``max_pages`` pages, each page at most
``max_page_bytes`` once decoded; a listing cut short by one says so (``TagListing.end``). A next
page already requested, a page of nothing but tags already listed, or a ``last`` already used is a
loop, and stops the listing. A Link to another host, port or scheme, with user info, or to
another path than this repository's tag list is refused: the registry's bearer token would go with
it. Tags are untrusted text: entries that are not valid tags (over 128
characters, other characters, not strings) are dropped and counted, never passed on; none is logged
whole.

``RegistryClient.list_tags`` runs ``paginate`` with a ``fetch`` that sends each page through the
client's auth, retries, circuit breaker and concurrency bounds.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

from tagpin.adapters.registry.http import BodyTooLarge, HttpResponse
from tagpin.adapters.registry.resilience import parse_retry_after
from tagpin.domain.refs import ImageRef, is_tag
from tagpin.ports.registry import AuthError, RegistryError, RepositoryNotFound, TagListing, TagListingEnd

log = logging.getLogger(__name__)

ACCEPT_TAG_LIST = "application/json"


@dataclass(frozen=True)
class TagLimits:
    page_size: int = 1000  # the n asked for; registries may serve fewer (with a Link) or ignore it
    max_tags: int = 100_000
    max_pages: int = 1000  # 50,000 tags at Quay's 50 a page, 100,000 at GHCR's 100
    max_page_bytes: int = 8 * 1024 * 1024  # one decoded page: 100,000 tags of up to 80 characters

    def __post_init__(self) -> None:
        if min(self.page_size, self.max_tags, self.max_pages, self.max_page_bytes) < 1:
            raise ValueError(f"tag listing limits must be positive: {self}")


@dataclass(frozen=True)
class Pages:
    """What ``paginate`` gathered; ``RegistryClient`` adds the request count and rate limits."""

    tags: tuple[str, ...]
    pages: int
    end: TagListingEnd
    dropped: int

    def listing(self, repository: ImageRef, requests: int, rate_limit: dict[str, str]) -> TagListing:
        return TagListing(repository, self.tags, self.pages, requests, self.end, self.dropped, rate_limit)


type FetchPage = Callable[[str], Awaitable[HttpResponse]]


# --- Link headers (RFC 5988 / 8288) ---------------------------------------------------------------

_LINK_PARAM_RE = re.compile(r'\s*;\s*([^\s=;,]+)\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^\s;,]*))?')


def next_link(values: list[str]) -> str | None:
    """The target of the first ``rel="next"`` link in ``Link`` header values (several links per
    value, quoted or bare parameters, ``rel`` with several relation types), as written."""
    for value in values:
        pos = 0
        while (start := value.find("<", pos)) >= 0:
            end = value.find(">", start)
            if end < 0:
                break
            target, pos = value[start + 1 : end].strip(), end + 1
            rels: list[str] = []
            while m := _LINK_PARAM_RE.match(value, pos):
                name, raw = m[1].lower(), m[2] or ""
                if raw.startswith('"'):
                    raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
                if name == "rel":
                    rels.extend(r.lower() for r in raw.split())
                pos = m.end()
            if "next" in rels:
                return target
    return None


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if parts.username is not None or parts.password is not None or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or {"https": 443, "http": 80}.get(scheme, 0)


def own_link(url: str, base_url: str, path: str) -> bool:
    """``url`` is this repository's tag list on the registry itself: same scheme, host and port
    as ``base_url``, no user info, the path ``path``."""
    origin = _origin(url)
    return origin is not None and origin == _origin(base_url) and urlsplit(url).path == path


def page_url(base_url: str, path: str, n: int | None, last: str | None = None) -> str:
    query = {k: v for k, v in (("n", None if n is None else str(n)), ("last", last)) if v is not None}
    return f"{base_url}{path}" + (f"?{urlencode(query)}" if query else "")


def check_page(response: HttpResponse, host: str, repository: str) -> None:
    """Raise for a tag-list answer other than a 2xx (after the client's retries)."""
    status = response.status
    if 200 <= status < 300:
        return
    if status == 404:
        raise RepositoryNotFound(f"{host}: repository {repository} not found", host=host, status=status)
    if status in (401, 403):
        raise AuthError(
            f"{host}: access to the tags of {repository} denied (HTTP {status})", host=host, status=status
        )
    retry_after = parse_retry_after(response.headers.get("retry-after")) if status == 429 else None
    raise RegistryError(
        f"{host}: HTTP {status} listing the tags of {repository}",
        host=host,
        status=status,
        retry_after=retry_after,
    )


def page_tags(body: bytes, host: str, repository: str) -> list[Any]:
    """The ``tags`` array of a tag-list page (``null`` or none is an empty page); entries unchecked.
    Anything but a JSON object with such an array is malformed."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        doc = None
    tags = doc.get("tags") if isinstance(doc, dict) else ...
    if tags is None:  # null or absent: no tags
        return []
    if not isinstance(tags, list):
        raise RegistryError(f"{host}: malformed tag list for {repository}", host=host, status=200)
    return tags


def _sample(entry: Any) -> str:
    text = entry if isinstance(entry, str) else type(entry).__name__
    return repr(text[:40] + "..." if len(text) > 40 else text)


# --- pagination -----------------------------------------------------------------------------------


class _Walk:
    """One listing: the pages asked for and the tags gathered so far."""

    def __init__(self, base_url: str, host: str, repository: str, limits: TagLimits) -> None:
        self.base_url, self.host, self.repository, self.limits = base_url, host, repository, limits
        self.path = f"/v2/{repository}/tags/list"
        self.tags: dict[str, None] = {}  # insertion-ordered set
        self.requested: set[str] = set()
        self.lasts: set[str] = set()
        self.pages = self.dropped = 0
        self.sample = ""  # the first invalid entry, shortened, for the log

    def take(self, entries: list[Any]) -> tuple[int, bool]:
        """Keep a page's valid new tags: (how many entries were tags listed already, whether a new
        tag found no room under ``max_tags``)."""
        repeats = 0
        for entry in entries:
            if not is_tag(entry):
                self.dropped += 1
                self.sample = self.sample or _sample(entry)
            elif entry in self.tags:
                repeats += 1
            elif len(self.tags) >= self.limits.max_tags:
                return repeats, True
            else:
                self.tags[entry] = None
        return repeats, False

    def after(
        self, url: str, asked: int | None, response: HttpResponse, entries: list[Any], repeats: int
    ) -> tuple[str, int | None] | TagListingEnd:
        """The page to ask for next, (URL, the n it asks for when built here), or why the listing ends."""
        link = next_link(response.headers.get_list("link"))
        if entries and repeats == len(entries):
            # Nothing new. With a Link the registry claims more and serves the same again: a loop.
            # Without one this was a page asked with last= that the registry ignored: the end.
            return "loop" if link is not None else "complete"
        if link is not None:
            target = urljoin(url, link)
            if not own_link(target, self.base_url, self.path):
                log.warning(
                    "%s: refusing the next-page Link of %s's tag list: not %s%s",
                    self.host,
                    self.repository,
                    self.host,
                    self.path,
                )
                return "refused-link"
            return "loop" if target in self.requested else (target, None)
        last = entries[-1] if entries else None
        if asked is None or len(entries) != asked or not is_tag(last):
            return "complete"  # no Link, and not a full page we asked n for (or no tag to go on from)
        if last in self.lasts:
            return "loop"
        self.lasts.add(last)
        return page_url(self.base_url, self.path, self.limits.page_size, last), self.limits.page_size


async def paginate(fetch: FetchPage, base_url: str, host: str, repository: str, limits: TagLimits) -> Pages:
    """Walk the tag list of ``repository`` at ``base_url`` (``scheme://host``) within ``limits``.
    ``fetch`` GETs one page URL and raises ``RegistryError`` for anything but a 2xx."""
    walk = _Walk(base_url, host, repository, limits)
    url = page_url(base_url, walk.path, limits.page_size)
    asked: int | None = limits.page_size  # the n of a URL built here (None: a Link's, or none)
    end: TagListingEnd
    while True:
        if walk.pages >= limits.max_pages:
            end = "max-pages"
            break
        if len(walk.tags) >= limits.max_tags:
            end = "max-tags"
            break
        walk.requested.add(url)
        try:
            response = await fetch(url)
        except BodyTooLarge as exc:
            raise RegistryError(
                f"{host}: a tag-list page of {repository} is over {exc.limit} bytes",
                host=host,
                status=exc.status,
            ) from None
        except RegistryError as exc:
            if walk.pages == 0 and exc.status == 400 and asked is not None:
                log.info(
                    "%s: the tag list of %s refused n=%d (HTTP 400); asking without n",
                    host,
                    repository,
                    asked,
                )
                url, asked = page_url(base_url, walk.path, None), None
                continue
            raise
        walk.pages += 1
        entries = page_tags(response.body, host, repository)
        repeats, full = walk.take(entries)
        following = "max-tags" if full else walk.after(url, asked, response, entries, repeats)
        if isinstance(following, str):
            end = following
            break
        url, asked = following
    if walk.dropped:
        log.warning(
            "%s: dropped %d invalid tag(s) listing %s, e.g. %s", host, walk.dropped, repository, walk.sample
        )
    return Pages(tuple(walk.tags), walk.pages, end, walk.dropped)
