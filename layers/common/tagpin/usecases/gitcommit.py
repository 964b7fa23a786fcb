"""One commit of edits to a branch of a Git repository, conflict-safe and idempotent (the step the
write-back of issue 28 builds on; docs/gitops.md).

Read the files at the branch's head, edit them (``edit``: a pure function of a file's path and
text, such as ``tagpin.domain.gitops.kustomize.edit``), and push one commit with that head as the
precondition. When the branch moved in between (someone pushed: ``HeadMoved``), or the server was
briefly unavailable, read again and edit again on the new head, so a person's commit made in
between is kept and the edit lands on top of it, after a backoff; after ``attempts`` tries the
error is raised. Files that already say what the edit writes make no commit (no empty commits).
An edit that cannot be made (``EditError``), denied credentials or a missing repository are
raised at once: trying again would not help.

``commit_files`` is the same with one edit of all the files at once (``FilesEdit``: the texts by
path, None for a file the branch does not have), for a caller that edits several files per
request and keeps a request's edits all or nothing (``tagpin.usecases.writeback``); its message
may be computed after the edit (a callable).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tagpin.domain.gitops.yamltext import EditError
from tagpin.ports.git import Author, Branch, GitError, GitNotFound, GitRepositories, Snapshot

type FileEdit = Callable[[str, str], str]  # (path, text) -> the new text
# the texts by path (None: no such file at the head) -> the new texts of the files that change
type FilesEdit = Callable[[Mapping[str, str | None]], Mapping[str, str]]
type Message = str | Callable[[], str]


@dataclass(frozen=True)
class Committed:
    """What was written: the new commit (None: every file already said it), the head it was built
    on, the files it changed and the tries it took."""

    commit: str | None
    parent: str
    changed: tuple[str, ...]
    attempts: int


def commit_edits(
    repos: GitRepositories,
    branch: Branch,
    paths: list[str],
    edit: FileEdit,
    message: Message,
    author: Author,
    *,
    attempts: int = 5,
    backoff_s: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> Committed:
    def each(texts: Mapping[str, str | None]) -> dict[str, str]:
        out = {}
        for path in paths:
            text = texts.get(path)
            if text is None:
                raise GitNotFound(f"{branch}: no file {path}")
            out[path] = edit(path, text)
        return out

    return commit_files(
        repos, branch, paths, each, message, author, attempts=attempts, backoff_s=backoff_s, sleep=sleep
    )


def commit_files(
    repos: GitRepositories,
    branch: Branch,
    paths: list[str],
    edit: FilesEdit,
    message: Message,
    author: Author,
    *,
    attempts: int = 5,
    backoff_s: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> Committed:
    return with_retries(
        lambda attempt: _once(repos, branch, paths, edit, message, author, attempt),
        attempts,
        backoff_s,
        sleep,
    )


def with_retries[T](
    call: Callable[[int], T], attempts: int, backoff_s: float, sleep: Callable[[float], None]
) -> T:
    """``call(attempt)``, again after a transient ``GitError`` (a non-fast-forward push, a server
    that is down) with a doubling backoff and jitter; the last attempt's error is raised."""
    for attempt in range(1, attempts + 1):
        try:
            return call(attempt)
        except GitError as exc:
            if not exc.transient or attempt == attempts:
                raise
            sleep(backoff_s * 2 ** (attempt - 1) * random.uniform(0.5, 1.5))  # noqa: S311 (jitter)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _once(
    repos: GitRepositories,
    branch: Branch,
    paths: list[str],
    edit: FilesEdit,
    message: Message,
    author: Author,
    attempt: int,
) -> Committed:
    snapshot = repos.read(branch, paths)
    texts = texts_of(snapshot, paths)
    changes = {
        path: new.encode("utf-8") for path, new in edit(texts).items() if path in texts and new != texts[path]
    }
    if not changes:
        return Committed(None, snapshot.commit, (), attempt)
    text = message if isinstance(message, str) else message()
    commit = repos.write(snapshot, changes, text, author)
    return Committed(commit, snapshot.commit, tuple(sorted(changes)), attempt)


def texts_of(snapshot: Snapshot, paths: list[str]) -> dict[str, str | None]:
    """The files' texts at the snapshot (None: no such file); ``EditError`` for one not UTF-8."""
    texts: dict[str, str | None] = {}
    for path in paths:
        data = snapshot.files.get(path)
        try:
            texts[path] = None if data is None else data.decode("utf-8")
        except UnicodeDecodeError:
            raise EditError(f"{path}: not UTF-8 text") from None
    return texts
