"""``GitRepositories`` over Git's smart HTTP with dulwich, in memory: no ``git`` binary, no disk.

``read`` fetches the branch's head at depth 1 (one commit and its tree, never the history) into an
in-memory object store kept per repository URL and branch: the push that follows sends only the new
commit, its changed trees and blobs, and a warm container's next read of that head fetches nothing.
Bounded: a store holds one commit's objects (another head is read into an empty store, the old one
dropped first; a push keeps only its commit's objects); at most ``KEEP`` stores, their packs
``KEEP_BYTES`` together (least recently used dropped first); a write whose store was dropped
since its read fetches the branch again (``HeadMoved`` if it moved). What a fetch receives is read
within a budget (``FETCH_BUDGET``), what its pack's objects declare they inflate to within another
(``INFLATED_BUDGET``, counted as the pack arrives, before dulwich inflates it: tagpin.adapters.git.packs):
past either the fetch stops with ``GitTooLarge`` naming it, before a repository too large for the
function, a server that does not stop sending, or a small pack that inflates to gigabytes exhausts
its memory.
``write`` builds the commit and pushes it with the head it was built on as the precondition: the
update command sent to receive-pack names that old head, so the server refuses it (and
``HeadMoved`` is raised) if the branch moved in between, whoever moved it; a push to tagpin's own
review branch (``to``) replaces whatever that branch held.

Credentials: ``token(host)`` (the caller's: a reader of ``tagpin/git/`` secrets) gives the user name and token
sent as HTTP Basic, as GitHub and GitLab accept tokens, only to that repository's origin (dulwich
drops them on a redirect elsewhere). Failures map to the port's errors: 401/403 ``GitDenied``,
404 ``GitNotFound``, a refused connection, a timeout or a 5xx ``GitUnavailable``. Messages name
the repository, never the token; what they quote of the server's words (a push's refusal reason,
an error it sent) is cut at ``SAID_MAX`` characters and made inert (``said``): a server may send
64 KB of anything there, and it ends up in the targets' detail and the logs.
"""

from __future__ import annotations

import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from dulwich.client import HTTPUnauthorized
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.object_store import MemoryObjectStore, commit_tree_changes, tree_lookup_path
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import MemoryRepo

from tagpin.adapters.git.client import Client as _Client
from tagpin.adapters.git.client import OverBudget
from tagpin.adapters.git.packs import BadPack, InflatedOverBudget
from tagpin.ports.git import (
    Author,
    Branch,
    GitDenied,
    GitError,
    GitNotFound,
    GitTooLarge,
    GitUnavailable,
    HeadMoved,
    Snapshot,
)

type TokenFor = Callable[[str], tuple[str, str] | None]  # host -> (user name, token), or anonymous
MAX_FILE = 1024 * 1024  # a file larger than this is not a manifest tagpin edits
ZERO = b"0" * 40
SAID_MAX = 300  # what an error keeps of the server's words
MiB = 1024 * 1024
# What one fetch may receive (the refs advertised and the pack). The write-back function has
# 512 MB (template.yaml, WriteBackFunction.MemorySize); dulwich holds a fetched pack whole and then
# every object inflated from it. Measured (a depth-1 read through Git's own HTTP server on
# 127.0.0.1): a repository of 29,658 manifests, 48 MB of YAML, sent a pack of 16.1 MB and the
# read's peak memory grew by 168 MB, about ten times the pack. 32 MiB of pack is then about 340 MB,
# with the runtime's own 90 MB or so under 512; a repository of manifests is far smaller.
FETCH_BUDGET = 32 * MiB
# What that pack may inflate to, counted as it arrives (tagpin.adapters.git.packs: what each
# object declares, and PER_OBJECT, 1 KiB, for each): zlib shrinks a blob of one repeated byte about
# 1,000 times, under the budget above (a 195 KB pack held 437 MB). Measured (stop 51): 32,000
# manifests each in a directory of its own (36 MiB of YAML, 64,606 objects, a 10.3 MiB pack) count
# 102.6 MiB and hold about 140 MiB more, 1.4 times what is counted; one large blob about 2.2 times.
# 128 MiB holds such a repository of about 40,000 manifests (a pack of about 13 MiB: this budget,
# not the one above, is the one that repository reaches) and at 2.2 times some 280 MB, with the
# runtime's 90 MB under 512 (96 MiB at first refused that repository of 32,000).
INFLATED_BUDGET = 4 * FETCH_BUDGET
# stores kept (the last read's always); their packs' bytes together (memory: ten times, inflated)
KEEP, KEEP_BYTES = 64, FETCH_BUDGET // 4


@dataclass
class _Store:
    repo: MemoryRepo
    head: ObjectID  # the commit whose objects, and only those, the store holds
    size: int  # bytes its fetch received


def _ref(name: str) -> Ref:
    return Ref(b"refs/heads/" + name.encode())


class DulwichRepositories:
    """One instance per container: the clients (a connection pool per origin) and the object
    stores (per repository URL and branch, bounded) are reused across invocations."""

    def __init__(
        self,
        token: TokenFor,
        *,
        timeout: float = 10.0,
        forget: Callable[[str], None] | None = None,
        fetch_budget: int = FETCH_BUDGET,
        inflated_budget: int = INFLATED_BUDGET,
        keep: int = KEEP,
    ) -> None:
        self._token = token
        self._budget, self._inflated = fetch_budget, inflated_budget
        self._forget = forget  # a refused token is read again next time
        self._timeout = timeout
        self._lock = threading.Lock()
        self._stores: OrderedDict[tuple[str, str], _Store] = OrderedDict()  # by URL and branch
        self._keep = keep
        self._pools: dict[str, Any] = {}  # a urllib3 PoolManager per origin, its connections kept
        self.requests = 0  # fetches and pushes started (the benchmark reports them)
        self.received = 0  # bytes the fetches received

    # -- GitRepositories -------------------------------------------------------------------

    def read(self, branch: Branch, paths: list[str]) -> Snapshot:
        client, path = self._client(branch.url, budget=self._budget)
        client.inflated = self._inflated
        key = (branch.url, branch.name)
        kept = self._store(key)
        fresh = MemoryRepo()
        ref = _ref(branch.name)
        heads: dict[Ref, ObjectID] = {}

        def wants(refs: Mapping[Ref, ObjectID], depth: int | None = None) -> list[ObjectID]:
            nonlocal kept
            heads.update(refs)
            head = refs.get(ref)
            if kept is not None and head == kept.head:
                return []  # its objects are all there
            kept = None  # a superseded head's objects go before the new ones come
            with self._lock:
                self._stores.pop(key, None)
            return [head] if head else []

        try:
            self._call(branch.url, "fetch", lambda: client.fetch(path, fresh, determine_wants=wants, depth=1))
        finally:
            with self._lock:
                self.received += client.received
        head = heads.get(ref)
        if head is None:
            raise GitNotFound(f"{branch.url}: no branch {branch.name!r}")
        if kept is None:
            kept = self._put(key, _Store(fresh, head, client.received))
        return Snapshot(branch, head.decode(), {p: self._file(kept.repo, head, p) for p in paths})

    def write(
        self,
        snapshot: Snapshot,
        changes: Mapping[str, bytes],
        message: str,
        author: Author,
        *,
        to: str | None = None,
    ) -> str:
        url = snapshot.branch.url
        client, path = self._client(url)
        parent = ObjectID(snapshot.commit.encode())
        store = self._holding(snapshot)
        repo = store.repo
        base = repo[parent]
        assert isinstance(base, Commit)
        blobs = []
        for name, content in sorted(changes.items()):
            blob = Blob.from_string(content)
            repo.object_store.add_object(blob)
            blobs.append((name.encode(), stat.S_IFREG | 0o644, blob.id))
        commit = Commit()
        commit.tree = commit_tree_changes(repo.object_store, base.tree, blobs)
        commit.parents = [parent]
        commit.author = commit.committer = f"{author.name} <{author.email}>".encode()
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = message.encode()
        repo.object_store.add_object(commit)
        target = _ref(to or snapshot.branch.name)

        def update(refs: dict[Ref, ObjectID]) -> dict[Ref, ObjectID]:
            if to is None and refs.get(target) != parent:
                raise HeadMoved(f"{url}: {snapshot.branch.name} moved from {snapshot.commit[:12]}")
            return {target: commit.id}

        def pack(have: Iterable[ObjectID], want: Iterable[ObjectID], **kw: Any) -> Any:
            known = [h for h in have if h in repo.object_store] + [parent]
            return repo.object_store.generate_pack_data(
                known, want, shallow=repo.get_shallow(), ofs_delta=kw.get("ofs_delta", True)
            )

        kept = parent  # what the store keeps: the branch's head, the pushed commit once it is
        try:
            result = self._call(url, "push", lambda: client.send_pack(path, update, pack))
            problem = (result.ref_status or {}).get(target)
            if problem:
                text = said(problem if isinstance(problem, str) else problem.decode(errors="replace"))
                if to is None:
                    raise HeadMoved(f"{url}: {snapshot.branch.name} was not updated: {text}")
                raise GitError(f"{url}: pushing {to} was refused: {text}")
            kept = commit.id if to is None else parent
        finally:
            _prune(repo, kept)
            store.head = kept
        return commit.id.decode()

    # -- internals -------------------------------------------------------------------------

    def _store(self, key: tuple[str, str]) -> _Store | None:
        with self._lock:
            if key in self._stores:
                self._stores.move_to_end(key)
            return self._stores.get(key)

    def _put(self, key: tuple[str, str], store: _Store) -> _Store:
        with self._lock:
            self._stores[key] = store
            self._stores.move_to_end(key)
            while len(self._stores) > max(1, self._keep) or (
                len(self._stores) > 1 and sum(s.size for s in self._stores.values()) > KEEP_BYTES
            ):
                self._stores.popitem(last=False)
            return store

    def _holding(self, snapshot: Snapshot) -> _Store:
        """The store holding the snapshot's commit: fetched again if it was dropped since the read."""
        key = (snapshot.branch.url, snapshot.branch.name)
        store = self._store(key)
        if store is None or store.head != snapshot.commit.encode():
            again = self.read(snapshot.branch, [])
            if again.commit != snapshot.commit:
                raise HeadMoved(f"{key[0]}: {key[1]} moved from {snapshot.commit[:12]}")
            store = self._store(key)
            assert store is not None
        return store

    def kept(self) -> dict[tuple[str, str], int]:
        """The stores kept: (URL, branch) -> how many objects it holds (tests, benchmarks)."""
        with self._lock:
            return {key: sum(1 for _ in store.repo.object_store) for key, store in self._stores.items()}

    def _client(self, url: str, budget: int | None = None) -> tuple[_Client, str]:
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise GitError(f"{url}: a repository URL is https://host/path (got {parts.scheme or 'none'})")
        if parts.username or parts.password:
            raise GitError(f"{parts.hostname}: a repository URL carries no credentials (use a secret)")
        credentials = self._token(parts.netloc)
        user, token = credentials if credentials else (None, None)
        base = f"{parts.scheme}://{parts.netloc}/"
        pool = self._pool(base)
        client = _Client(base, pool_manager=pool, username=user, password=token)
        client.budget = budget
        return client, parts.path

    def _pool(self, origin: str) -> Any:
        import urllib3

        with self._lock:
            pool = self._pools.get(origin)
            if pool is None:
                timeout = urllib3.Timeout(total=self._timeout)
                pool = self._pools[origin] = urllib3.PoolManager(retries=False, timeout=timeout, maxsize=4)
            return pool

    def close(self) -> None:
        """Close the kept connections (a new container, in effect)."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.clear()

    def _call(self, url: str, what: str, run: Callable[[], Any]) -> Any:
        import urllib3.exceptions

        with self._lock:
            self.requests += 1
        try:
            return run()
        except GitError:
            raise
        except (OverBudget, InflatedOverBudget) as exc:
            done = " received" if isinstance(exc, OverBudget) else "'s pack inflates to"
            of = "" if isinstance(exc, OverBudget) else " inflated"
            raise GitTooLarge(
                f"{url}: {what}{done} more than the {exc.budget / MiB:g} MiB{of} budget of a fetch (a "
                "repository of manifests is far smaller; docs/gitops.md)"
            ) from None
        except BadPack as exc:
            raise GitError(f"{url}: {what} failed: the server sent a malformed pack: {exc}") from None
        except HTTPUnauthorized:
            self._refused(url)
            raise GitDenied(
                f"{url}: the server refused the credentials (401) on {what}; check the token in the "
                "repository host's secret (docs/gitops.md, credentials)"
            ) from None
        except NotGitRepository:
            raise GitNotFound(f"{url}: no such repository (404)") from None
        except UnicodeDecodeError:  # dulwich decodes a push's refusal reason as UTF-8
            raise GitError(f"{url}: {what} failed: the server answered words not in UTF-8") from None
        except (urllib3.exceptions.HTTPError, OSError, HangupException) as exc:
            raise GitUnavailable(f"{url}: {what} failed: {type(exc).__name__}") from None
        except GitProtocolError as exc:
            text = str(exc)
            if _unreachable(exc):
                raise GitUnavailable(f"{url}: {what} failed: the server cannot be reached") from None
            status = _status(text)
            if status == 403:
                self._refused(url)
                raise GitDenied(
                    f"{url}: the token may not {what} (403): it needs write access to the repository"
                ) from None
            if status is not None and 500 <= status < 600:
                raise GitUnavailable(f"{url}: {what} failed: the server answered {status}") from None
            raise GitError(f"{url}: {what} failed: {said(text)}") from None

    def _refused(self, url: str) -> None:
        if self._forget is not None:
            self._forget(urlsplit(url).netloc)

    @staticmethod
    def _file(repo: MemoryRepo, commit: bytes, path: str) -> bytes | None:
        top = repo[commit]
        assert isinstance(top, Commit)
        try:
            _mode, sha = tree_lookup_path(repo.object_store.__getitem__, top.tree, path.encode())
        except KeyError:
            return None
        obj = repo.object_store[sha]
        if isinstance(obj, Tree) or not isinstance(obj, Blob):
            raise GitError(f"{path}: is a directory, not a file")
        data = obj.as_raw_string()
        if len(data) > MAX_FILE:
            raise GitError(f"{path}: {len(data)} bytes, more than the {MAX_FILE} tagpin edits")
        return data


def _prune(repo: MemoryRepo, commit: ObjectID) -> None:
    """Delete from ``repo`` every object but ``commit``'s: itself, its trees and blobs."""
    store, keep, todo = repo.object_store, set[ObjectID](), [commit]
    assert isinstance(store, MemoryObjectStore)
    while todo:
        if (sha := todo.pop()) in keep:
            continue
        keep.add(sha)
        obj = store[sha]
        entries = list(obj.iteritems()) if isinstance(obj, Tree) else []
        todo += [obj.tree] if isinstance(obj, Commit) else [e.sha for e in entries if stat.S_ISDIR(e.mode)]
        keep.update(e.sha for e in entries if not stat.S_ISDIR(e.mode))  # blobs (or submodules' commits)
    for sha in [s for s in store if s not in keep]:
        del store[sha]
    repo.update_shallow({commit}, repo.get_shallow() - {commit})


def said(text: str, limit: int = SAID_MAX) -> str:
    """The server's words as inert text: each character that is not printable (escapes, a carriage
    return, a line break) a ``?``, cut at ``limit`` characters with how many more there were."""
    kept = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return kept if len(text) <= limit else f"{kept}... ({len(text) - limit} more characters not shown)"


def _unreachable(exc: BaseException) -> bool:
    """dulwich wraps urllib3's connection errors (refused, reset, timed out) in GitProtocolError."""
    import urllib3.exceptions

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, urllib3.exceptions.HTTPError | OSError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "Failed to establish a new connection" in str(exc) or "timed out" in str(exc)


def _status(text: str) -> int | None:
    """The HTTP status of an answer dulwich did not expect, from where it puts it (its own words,
    ``unexpected http resp <status> for <url>``), never from elsewhere in the text: a server's words
    (a push refused on side band 3) or a URL that holds "403" are not a status."""
    found = _UNEXPECTED.match(text)
    return int(found[1]) if found else None


_UNEXPECTED = re.compile(r"unexpected http resp (\d{3}) for ")
