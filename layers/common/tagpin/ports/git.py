"""Git repositories, as the write-back use case (``tagpin.usecases.writeback``) needs them:
read files at a branch's head, write one commit of edits on top of it and push it with that head
as the precondition, and open a pull (merge) request for a branch; and the queue that carries
the write requests to the function that writes (``WriteQueue``).

``tagpin.adapters.git`` implements ``GitRepositories`` with dulwich (pure Python: Lambda has no
``git`` binary) and ``ReviewRequests`` with GitHub's and GitLab's REST APIs (``reviews``). Errors
say whether trying again may help (``transient``); none carries a credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from tagpin.domain.gitops.writes import WriteRequest


@dataclass(frozen=True)
class Branch:
    """A branch of a repository: ``url`` as the configuration names it (``https://host/org/apps.git``)."""

    url: str
    name: str

    def __str__(self) -> str:
        return f"{self.url}#{self.name}"


@dataclass(frozen=True)
class Snapshot:
    """A branch's head commit and the files asked for at it (None: no such file)."""

    branch: Branch
    commit: str
    files: Mapping[str, bytes | None]


@dataclass(frozen=True)
class Author:
    name: str = "tagpin"
    email: str = "tagpin@users.noreply.invalid"


class ReviewState(StrEnum):
    OPEN = "open"
    MERGED = "merged"
    CLOSED = "closed"  # closed without a merge: a person declined it


@dataclass(frozen=True)
class PullRequest:
    """A pull (GitHub) or merge (GitLab) request: its number and the page a person reviews."""

    number: int
    url: str
    created: bool  # False: one was already there for the branch
    state: ReviewState = ReviewState.OPEN


class GitError(Exception):
    """A Git operation failed; ``transient``: the same request may succeed later (a server down,
    a timeout, a 5xx). The message names the repository and what to do, never a credential."""

    transient = False


class GitUnavailable(GitError):
    """The server could not be reached or answered 5xx / timed out: retried with backoff."""

    transient = True


class GitDenied(GitError):
    """The server refused the credentials (401) or the permission (403): nothing was written;
    fixing the token (or its scope) and delivering the change again writes it."""


class GitUnusable(GitError):
    """The repository cannot be written as it is: the requests for it fail (delivering them again
    would not help until a person changes it or the configuration)."""


class GitNotFound(GitUnusable):
    """No such repository, or no such branch to start from."""


class GitTooLarge(GitUnusable):
    """The fetch received more than its budget (a repository too large for the function's memory,
    or a server that does not stop sending): the repository's targets fail with it."""


class HeadMoved(GitError):
    """The branch is no longer at the commit the edit was made on (someone pushed in between):
    fetch again, re-apply the edit on the new head, push again."""

    transient = True


class GitRepositories(Protocol):
    def read(self, branch: Branch, paths: list[str]) -> Snapshot:
        """The head of ``branch`` and ``paths`` at it (``GitNotFound``: no such branch)."""
        ...

    def write(
        self,
        snapshot: Snapshot,
        changes: Mapping[str, bytes],
        message: str,
        author: Author,
        *,
        to: str | None = None,
    ) -> str:
        """Commit ``changes`` (path -> new content) on top of the snapshot's head; push it to the
        snapshot's branch only if that branch is still at the snapshot's head (else ``HeadMoved``),
        or, with ``to``, to that branch of the same repository whatever it held (tagpin's own
        review branch). The new commit's id."""
        ...


class ReviewRequests(Protocol):
    def find(self, url: str, source: str, target: str) -> PullRequest | None:
        """The request to merge branch ``source`` into ``target`` of the repository at ``url``, in
        any state: the open one, else the latest one closed or merged; None: there never was one."""
        ...

    def open(self, url: str, source: str, target: str, title: str, body: str) -> PullRequest:
        """Open a request to merge branch ``source`` into ``target`` of the repository at ``url``,
        or find the one already open for ``source``."""
        ...


class WriteQueue(Protocol):
    """The write-back queue (SQS FIFO): one message group per repository, so the writes of one
    repository are made one after the other and never wait for another repository's."""

    def send(self, request: WriteRequest) -> None: ...
