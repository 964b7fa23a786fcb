"""Pull-request mode (docs/gitops.md): a branch for review instead of a commit to the deployed
branch.

The edit is made on the deployed branch's head, as a commit would be, and pushed to tagpin's own
branch, ``tagpin/<image>-<12 digits of the digest>`` (``tagpin/revert-…`` for a revert), whatever
that branch held; then the host's API opens a pull (merge) request from it to the deployed branch,
or finds the one already open (``ReviewRequests``). Idempotent: a request delivered again finds
the branch already saying it (no second push) and the request open (no second request); the
deployed branch already saying it needs no request at all. A request a person closed without
merging is their answer for that digest: nothing is pushed or opened again, and the write-back
holds the targets on it (a new digest is a new branch and a new request; to roll this one after
all, a person reopens the request and releases the targets). A transient failure (the server down,
a 5xx) is tried again with backoff, as a commit is.

Nothing reaches the cluster until a person merges: the targets keep their claim (``pending``)
with the request's URL as their detail, and the image's history records the request. After the
merge the GitOps tool applies it; the next reconcile finds the workload at the digest and records
the target applied and verified, as for a workload already current.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from tagpin.domain.gitops.writes import WriteKind, WriteRequest
from tagpin.domain.messages import Trigger
from tagpin.ports.git import (
    Author,
    Branch,
    GitNotFound,
    GitRepositories,
    PullRequest,
    ReviewRequests,
    ReviewState,
)
from tagpin.ports.state import ImageEvent, State, TargetStatus
from tagpin.usecases.gitcommit import FilesEdit, texts_of, with_retries

SLUG = re.compile(r"[^A-Za-z0-9._-]+")
BODY_MAX = 60_000  # GitHub refuses a body over 65,536 characters


@dataclass(frozen=True)
class Reviewed:
    """The review branch's head and the request (both None: the deployed branch already says it)."""

    branch: str
    commit: str | None
    request: PullRequest | None
    base_head: str

    @property
    def declined(self) -> bool:
        """A person closed the request without merging it (or merged it and changed the deployed
        branch back since): their answer for this digest, not asked again."""
        return self.request is not None and self.request.state is not ReviewState.OPEN


def review_branch(request: WriteRequest) -> str:
    """``tagpin/web-0123456789ab``: one branch per image and digest (and kind)."""
    move = request.move
    name = SLUG.sub("-", move.image.rsplit("/", 1)[-1].replace(":", "-").replace("@", "-")).strip("-.")
    digits = move.digest.hex[:12]
    prefix = "revert-" if request.kind is WriteKind.REVERT else ""
    return f"tagpin/{prefix}{name[:80]}-{digits}"


def open_review(
    repos: GitRepositories,
    reviews: ReviewRequests,
    base: Branch,
    source: str,
    paths: list[str],
    edit: FilesEdit,
    message: Callable[[], str],
    author: Author,
    *,
    attempts: int = 5,
    backoff_s: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> Reviewed:
    return with_retries(
        lambda _attempt: _once(repos, reviews, base, source, paths, edit, message, author),
        attempts,
        backoff_s,
        sleep,
    )


def _once(
    repos: GitRepositories,
    reviews: ReviewRequests,
    base: Branch,
    source: str,
    paths: list[str],
    edit: FilesEdit,
    message: Callable[[], str],
    author: Author,
) -> Reviewed:
    snapshot = repos.read(base, paths)
    texts = texts_of(snapshot, paths)
    changes = {p: new.encode() for p, new in edit(texts).items() if p in texts and new != texts[p]}
    if not changes:
        return Reviewed(source, None, None, snapshot.commit)
    found = reviews.find(base.url, source, base.name)
    if found is not None and found.state is not ReviewState.OPEN:
        return Reviewed(source, None, found, snapshot.commit)  # declined: nothing pushed or opened
    text = message()
    try:
        mine = repos.read(Branch(base.url, source), list(changes))
    except GitNotFound:
        mine = None
    if mine is not None and all(mine.files.get(p) == c for p, c in changes.items()):
        commit = mine.commit  # pushed before (a request delivered again): not pushed twice
    else:
        commit = repos.write(snapshot, changes, text, author, to=source)
    subject, _, body = text.partition("\n")
    opened = found or reviews.open(base.url, source, base.name, subject, body.strip()[:BODY_MAX])
    return Reviewed(source, commit, opened, snapshot.commit)


def decline(
    state: State,
    request: WriteRequest,
    targets: tuple[str, ...],
    done: Reviewed,
    waits: TargetStatus,
    now: int,
) -> str:
    """A person declined the request: a pin's targets are held on its digest (the consumer's hold
    gate then sends nothing more for it, and the reconciler's heal neither); a revert's stay
    failed, with why. What was done, in words."""
    assert done.request is not None
    how = (
        "was closed without merge"
        if done.request.state is ReviewState.CLOSED
        else "was merged, and the deployed branch was changed back since"
    )
    said = (
        f"pull request {done.request.url} {how}: held on this digest until the tag moves "
        "(to roll it after all, reopen the request and run tagpin release)"
    )
    states = state.targets.get_many(list(targets))
    for target in targets:
        st = states.get(target)
        if st is None or st.digest != request.move.digest or st.status is not waits:
            continue  # moved on meanwhile
        if request.kind is WriteKind.PIN:
            move = request.move
            state.targets.hold(target, move.digest, now, reason=said, trigger=move.trigger, if_still=st)
        else:
            state.targets.finish(
                target,
                request.move.digest,
                TargetStatus.FAILED,
                now,
                trigger=Trigger.ROLLBACK,
                detail=f"not restored through Git: the revert's {said}",
                correlation_id=request.move.correlation_id,
                expected=frozenset({waits}),
            )
    return said


def record(
    state: State,
    request: WriteRequest,
    targets: tuple[str, ...],
    done: Reviewed,
    waits: TargetStatus,
    now: int,
) -> str:
    """The targets keep their claim (``waits``), the request's URL as detail and in their history;
    the image's history gets the request once, when it is opened. What was done, in words."""
    assert done.request is not None and done.commit is not None
    opened = done.request
    verb = "opened" if opened.created else "open"
    said = f"pull request {opened.url} {verb} for {done.branch} at {done.commit}"
    extra = {
        "commit": done.commit,
        "repository": request.repository,
        "branch": done.branch,
        "review": opened.url,
    }
    for target in targets:
        state.targets.finish(
            target,
            request.move.digest,
            waits,
            now,
            trigger=request.move.trigger,
            detail=applies(f"awaiting review: {said}", request, target),
            correlation_id=request.move.correlation_id,
            expected=frozenset({waits}),
            extra=extra,
        )
    if opened.created:
        state.history.image_event(
            request.move.image,
            request.move.digest,
            ImageEvent.COMMITTED,
            now,
            detail=f"{request.kind.value} {request.reference}: {said} ({', '.join(targets)})",
            trigger=request.move.trigger,
            correlation_id=request.move.correlation_id,
        )
    return said


def applies(detail: str, request: WriteRequest, target: str) -> str:
    """``detail`` and who applies the target's workload, when the consumer named its owner
    (``tagpin status`` and the console show it): ``... (Argo CD Application shop applies it)``."""
    owner = request.owners.get(target)
    return f"{detail} ({owner} applies it)" if owner else detail
