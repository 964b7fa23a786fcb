"""A registry in memory: the ``Resolver``, ``BatchResolver``, ``ManifestFetcher`` and ``TagLister``
of ``tagpin.ports.registry``, as ``tagpin.adapters.registry.RegistryClient`` implements them."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterable, Mapping

from tagpin.domain.refs import Digest, ImageRef
from tagpin.ports.registry import (
    OCI_INDEX,
    BatchResolver,
    ManifestFetcher,
    ManifestNotFound,
    RegistryError,
    RepositoryNotFound,
    Resolution,
    Resolver,
    TagLister,
    TagListing,
)

from tests.support.clock import FakeClock

type Answer = str | Exception  # a digest, or what the registry fails with
type Script = Answer | list[Answer]  # a list: one answer a call, the last one for ever after
type TagsAnswer = list[str] | TagListing | Exception  # a repository's tags, its whole listing, or a failure


class ScriptedRegistry:
    """Answers each tag (``ref.tagged``) from ``answers``, else ``default``, else 404.

    An answer is a digest or an exception (raised by ``resolve``; a ``RegistryError`` in the
    ``start_many`` result, as the real client turns every failure into one), or a list of those:
    the registry changes its answer between calls (the list is consumed; its last answer stays).
    ``down`` fails every tag of a registry host. ``calls`` records each tag resolved, in order.

    ``start_many`` spends ``cost`` seconds of ``clock`` on each tag; a tag that would finish after
    the deadline is left out of the result, as the real client cancels it.

    ``list_tags`` answers a repository (``registry/repository``) from ``tag_lists``: its tags (a
    complete one-page listing), a whole ``TagListing`` (e.g. a truncated one) or an exception;
    without an entry, the tags ``answers`` scripts for that repository, in order; with none, 404
    (``RepositoryNotFound``). ``listed`` records each repository listed, in order.
    """

    def __init__(
        self,
        answers: Mapping[str, Script] | None = None,
        *,
        default: Script | None = None,
        media_type: str = OCI_INDEX,
        clock: FakeClock[float] | None = None,
        cost: float = 0.0,
    ) -> None:
        self.answers: dict[str, Script] = dict(answers or {})
        self.default = default
        self.down: dict[str, Exception] = {}
        self.media_type = media_type
        self.manifests: dict[str, tuple[str, bytes]] = {}  # str(ref) -> (media type, body)
        self.clock: FakeClock[float] = clock if clock is not None else FakeClock(1000.0)
        self.cost = cost
        self.calls: list[str] = []
        self.fetched: list[str] = []
        self.tag_lists: dict[str, TagsAnswer] = {}
        self.listed: list[str] = []
        self._lock = threading.Lock()

    def _answer(self, ref: ImageRef) -> Answer:
        with self._lock:
            self.calls.append(ref.tagged)
            if ref.registry in self.down:
                return self.down[ref.registry]
            script = self.answers.get(ref.tagged, self.default)
            if script is None:
                return ManifestNotFound(f"{ref.tagged}: manifest unknown", host=ref.registry, status=404)
            if isinstance(script, list):
                return script.pop(0) if len(script) > 1 else script[0]
            return script

    def resolve(self, ref: ImageRef) -> Resolution:
        answer = self._answer(ref)
        if isinstance(answer, Exception):
            raise answer
        return Resolution(ref=ref, digest=Digest(answer), media_type=self.media_type, method="HEAD")

    def start_many(
        self, refs: Iterable[ImageRef], *, deadline: float | None = None
    ) -> concurrent.futures.Future[dict[ImageRef, Resolution | RegistryError]]:
        out: dict[ImageRef, Resolution | RegistryError] = {}
        for ref in dict.fromkeys(refs):
            if deadline is not None and self.clock.now + self.cost > deadline:
                continue
            self.clock.advance(self.cost)
            try:
                out[ref] = self.resolve(ref)
            except RegistryError as exc:
                out[ref] = exc
            except Exception as exc:
                out[ref] = RegistryError(f"{ref.registry}: {type(exc).__name__}: {exc}", host=ref.registry)
        future: concurrent.futures.Future[dict[ImageRef, Resolution | RegistryError]] = (
            concurrent.futures.Future()
        )
        future.set_result(out)
        return future

    def fetch_manifest(self, ref: ImageRef) -> tuple[str, bytes]:
        with self._lock:
            self.fetched.append(str(ref))
            down = self.down.get(ref.registry)
        if down is not None:
            raise down
        if str(ref) not in self.manifests:
            raise AssertionError(f"no manifest scripted for {ref}")
        return self.manifests[str(ref)]

    def list_tags(self, repository: ImageRef) -> TagListing:
        name = repository.name
        with self._lock:
            self.listed.append(name)
            down = self.down.get(repository.registry)
            answer = self.tag_lists.get(name)
            if answer is None:
                prefix = f"{name}:"
                scripted = [t[len(prefix) :] for t in self.answers if t.startswith(prefix)]
                answer = scripted or None
        if down is not None:
            raise down
        if answer is None:
            raise RepositoryNotFound(f"{name}: repository not found", host=repository.registry, status=404)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, TagListing):
            return answer
        bare = ImageRef(repository.registry, repository.repository)
        return TagListing(bare, tuple(dict.fromkeys(answer)), pages=1, requests=1)


_resolver: Resolver = ScriptedRegistry()
_batch: BatchResolver = ScriptedRegistry()
_fetcher: ManifestFetcher = ScriptedRegistry()
_lister: TagLister = ScriptedRegistry()
