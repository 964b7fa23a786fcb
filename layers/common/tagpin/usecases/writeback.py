"""Write back to Git (docs/gitops.md): what the write-back function does with a batch of requests.

The consumer decided everything a live patch would need decided (waves, windows, approvals, trust
gates, the ordering claim) and sent, per repository, the reference its files are made to say
(``tagpin.usecases.gitroute``); the verifier sends the previous reference after a digest failed
(``tagpin.usecases.gitrevert``). Here:

- **One commit per repository per batch.** The requests of a batch are grouped by repository and
  branch; each group is one commit (``tagpin.usecases.gitcommit.commit_files``: read at the head,
  edit, push with the head as the precondition; a push that lost the race is read and edited
  again on the new head after a backoff, so a person's commit in between is kept).
- **Never backwards.** A request writes only for the targets whose state still holds its digest:
  a pin for targets the consumer claimed (``pending``), a revert for targets the verifier failed
  (``failed``). A target a newer digest claimed since is left out, and a file any of whose
  targets moved to a newer observation is not written by an older request.
- **Idempotent.** Files that already say it make no commit; a request delivered twice finds its
  targets applied and writes nothing.
- **All or nothing per request.** A request whose file cannot be edited as configured (no such
  entry, a missing file) writes none of its files; its targets are recorded ``failed`` with the
  reason, and the other requests of the group are committed.
- **Failures.** Refused credentials, a server that is down, a race lost every time: nothing is
  written, the targets keep their claim with the reason as detail, and the request is reported
  for a later delivery (``WriteOutcome.RETRY``: the queue brings it back on its schedule).

After a pin's commit each target is ``applied`` (the commit id in its history) and a delayed
verification follows it, carrying the commit: the verifier waits for the GitOps tool to apply it
(``tagpin.usecases.verify``). After a revert's commit the target is ``rolled_back``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tagpin.domain.config import RolloutSettings, WriteBackFile, WriteMode
from tagpin.domain.gitops.pins import Pin
from tagpin.domain.gitops.writes import WriteKind, WriteOutcome, WriteRequest, Written, edit_file
from tagpin.domain.gitops.yamltext import EditError
from tagpin.domain.messages import Trigger
from tagpin.ports.git import Author, Branch, GitError, GitRepositories, GitUnusable, ReviewRequests
from tagpin.ports.queues import VerificationQueue
from tagpin.ports.state import ImageEvent, ImageEventRecord, State, TargetState, TargetStatus
from tagpin.usecases.gitcommit import Committed, commit_files
from tagpin.usecases.gitreview import applies, decline, open_review, record, review_branch
from tagpin.usecases.gitverify import WriteVerifications

logger = logging.getLogger(__name__)

WAITS_FOR = {WriteKind.PIN: TargetStatus.PENDING, WriteKind.REVERT: TargetStatus.FAILED}
SUBJECT_MAX = 100


@dataclass
class _Request:
    """A request of the group: the targets it still moves, the files it writes, why it failed."""

    request: WriteRequest
    targets: tuple[str, ...]
    files: list[WriteBackFile] = field(default_factory=list)
    error: str | None = None


class Writer:
    def __init__(
        self,
        *,
        repos: GitRepositories,
        reviews: ReviewRequests | None = None,
        state: State,
        verifications: VerificationQueue | None,
        settings: Callable[[], RolloutSettings],
        author: Callable[[], Author],
        clock: Callable[[], int],
        attempts: int = 5,
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._repos = repos
        self._reviews = reviews
        self._state = state
        self._verified = WriteVerifications(verifications, settings)
        self._author = author
        self._clock = clock
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._sleep = sleep

    def write(self, requests: Sequence[WriteRequest]) -> list[Written]:
        """What became of each request, in their order."""
        groups: dict[tuple[str, str], list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault((request.repository, request.branch), []).append(i)
        out: dict[int, Written] = {}
        for indexes in groups.values():
            results = self._group([requests[i] for i in indexes])
            out.update(zip(indexes, results, strict=True))
        return [out[i] for i in range(len(requests))]

    # -- one repository and branch -------------------------------------------------------------

    def _group(self, requests: list[WriteRequest]) -> list[Written]:
        states = self._state.targets.get_many(list({t for r in requests for t in r.targets}))
        for request in requests:  # delivered again after its targets were applied (usecases.gitverify)
            self._verified.again(request, states, self._clock())
        group = [self._plan(r, states) for r in requests]
        reviewed = {id(g): self._review(g) for g in group if g.request.mode is WriteMode.PULL_REQUEST}
        if reviewed:  # each on its own branch for review (tagpin.usecases.gitreview); the rest committed
            rest = [g for g in group if id(g) not in reviewed]
            committed = iter(self._commit(rest) if rest else [])
            return [reviewed.get(id(g)) or next(committed) for g in group]
        return self._commit(group)

    def _commit(self, group: list[_Request]) -> list[Written]:
        failed = {id(g): self._failed(g) for g in group if g.error is not None}
        if not any(g.files for g in group):
            return [failed.get(id(g)) or _superseded(g) for g in group]
        first = group[0].request
        branch = Branch(first.repository, first.branch)
        paths = list(dict.fromkeys(f.path for g in group for f in g.files))
        planned = [group]  # the first push edits the plan just made (``_group``), each retry a new one
        try:
            done = commit_files(
                self._repos,
                branch,
                paths,
                lambda texts: _edit(planned.pop() if planned else self._replan(group), texts),
                lambda: _message(group),
                self._author(),
                attempts=self._attempts,
                backoff_s=self._backoff_s,
                sleep=self._sleep,
            )
        except (EditError, GitUnusable) as exc:  # the repository, not this request: all of them
            for g in group:
                g.error = g.error or str(exc)
            return [failed.get(id(g)) or (self._failed(g) if g.files else _superseded(g)) for g in group]
        except GitError as exc:
            logger.warning(
                "not written to Git, tried again later", extra={"branch": str(branch), "error": str(exc)}
            )
            return [
                failed.get(id(g)) or (self._retry(g, str(exc)) if g.files else _superseded(g)) for g in group
            ]
        return [failed.get(id(g)) or self._done(g, branch, done) for g in group]

    def _review(self, g: _Request) -> Written:
        """Pull-request mode: the edit on tagpin's branch and a request to merge it
        (``tagpin.usecases.gitreview``); the targets keep their claim until the merge."""
        request = g.request
        if g.error is not None or not g.files:
            return self._failed(g) if g.error is not None else _superseded(g)
        if self._reviews is None:
            g.error = "pull-request mode needs the Git host's API, which this function was not given"
            return self._failed(g)
        base = Branch(request.repository, request.branch)
        planned = [[g]]  # as a commit's: each retry edits on the targets' states read again
        try:
            done = open_review(
                self._repos,
                self._reviews,
                base,
                review_branch(request),
                [f.path for f in g.files],
                lambda texts: _edit(planned.pop() if planned else self._replan([g]), texts),
                lambda: _message([g]),
                self._author(),
                attempts=self._attempts,
                backoff_s=self._backoff_s,
                sleep=self._sleep,
            )
        except (EditError, GitUnusable) as exc:
            g.error = g.error or f"{request.repository}: {exc}"
            return self._failed(g)
        except GitError as exc:
            return self._retry(g, str(exc))
        if g.error is not None:
            return self._failed(g)
        if done.declined:  # a person's answer: the targets held on the digest
            said = decline(self._state, request, g.targets, done, WAITS_FOR[request.kind], self._clock())
            return Written(WriteOutcome.DECLINED, None, said, g.targets)
        if done.request is None or done.commit is None:  # the deployed branch already says it
            return self._done(g, base, Committed(None, done.base_head, (), 1))
        said = record(self._state, request, g.targets, done, WAITS_FOR[request.kind], self._clock())
        return Written(WriteOutcome.REQUESTED, done.commit, said, g.targets)

    def _plan(self, request: WriteRequest, states: Mapping[str, TargetState]) -> _Request:
        """The targets the request still moves, and the files it may write for them."""
        wanted = WAITS_FOR[request.kind]
        targets = tuple(t for t in request.targets if _holds(states.get(t), request, wanted))
        plan = _Request(request, ())
        covered: set[str] = set()
        for write in request.files:
            if not set(write.targets) & set(targets):
                continue
            if any(_moved_on(states.get(t), request) for t in write.targets):
                continue  # a newer observation holds a target of this file: never written backwards
            plan.files.append(write.file)
            covered |= set(write.targets)
        plan.targets = tuple(t for t in targets if t in covered)
        return plan

    def _replan(self, group: list[_Request]) -> list[_Request]:
        """The group planned again on its targets' states read now, after each read of the branch
        but the first (a push that lost its race is read and edited again, seconds later): a target
        held, or claimed by a newer digest, since the plan is left out, as the live patch reads its
        claim again after each read of the workload. The push itself remains the one-call window."""
        states = self._state.targets.get_many(list({t for g in group for t in g.request.targets}))
        for g in group:
            again = self._plan(g.request, states)
            g.targets, g.files = again.targets, again.files
        return group

    def _done(self, g: _Request, branch: Branch, done: Committed) -> Written:
        if g.error is not None:
            return self._failed(g)
        if not g.files:
            return _superseded(g)
        request, move, now = g.request, g.request.move, self._clock()
        head = done.commit or done.parent
        where = f"{branch.url}#{branch.name}"
        said = f"committed {head} to {where}" if done.commit else f"{where} already says it at {head}"
        extra = {"commit": head, "repository": branch.url, "branch": branch.name}
        # The image's COMMITTED item goes in the first target outcome's transaction: a process that
        # dies after it finds, run again, that target settled and the item there (alone if none is).
        committed = None
        if done.commit is not None:
            detail = f"{request.kind.value} {request.reference}: {said} ({', '.join(g.targets)})"
            committed = ImageEventRecord(
                move.image,
                move.digest,
                ImageEvent.COMMITTED,
                now,
                detail=detail,
                trigger=move.trigger,
                correlation_id=move.correlation_id,
            )
        if request.kind is WriteKind.REVERT:
            why = request.reason or "the digest failed"
            written = self._finish_each(
                g,
                TargetStatus.ROLLED_BACK,
                lambda _: f"restored {request.reference} through Git: {said}; {why}",
                Trigger.ROLLBACK,
                now,
                extra=extra,
                event=committed,
            )
        else:
            written = self._finish_each(
                g,
                TargetStatus.APPLIED,
                lambda target: applies(f"{request.reference}: {said}", request, target),
                move.trigger,
                now,
                extra=extra,
                event=committed,
                previous=request.previous,
                then=lambda target: self._verified.send(request, target, head, now),
            )
        if committed is not None and not written:
            self._state.history.record(committed)
        logger.info(
            "written to Git",
            extra={"kind": request.kind, "branch": where, "commit": head, "targets": list(g.targets)},
        )
        return Written(
            WriteOutcome.COMMITTED if done.commit else WriteOutcome.UNCHANGED, head, said, g.targets
        )

    def _failed(self, g: _Request) -> Written:
        """Cannot be written as configured: recorded on the targets (a pin's claim ends ``failed``,
        a revert's target stays ``failed`` with why it was not restored); not retried."""
        request = g.request
        verb = "not written to Git" if request.kind is WriteKind.PIN else "not restored through Git"
        detail = f"{verb}: {g.error}"
        trigger = request.move.trigger if request.kind is WriteKind.PIN else Trigger.ROLLBACK
        self._finish_each(g, TargetStatus.FAILED, lambda _: detail, trigger, self._clock())
        logger.error("cannot write to Git", extra={"repository": request.repository, "error": g.error})
        return Written(WriteOutcome.FAILED, None, detail, g.targets)

    def _retry(self, g: _Request, error: str) -> Written:
        """Nothing was written: the targets keep their state, with the reason as detail."""
        detail = f"not written to Git yet, tried again later: {error}"
        self._finish_each(
            g, WAITS_FOR[g.request.kind], lambda _: detail, g.request.move.trigger, self._clock()
        )
        return Written(WriteOutcome.RETRY, None, detail, g.targets)

    def _finish_each(
        self,
        g: _Request,
        status: TargetStatus,
        detail: Callable[[str], str],
        trigger: Trigger,
        now: int,
        *,
        extra: dict[str, str] | None = None,
        event: ImageEventRecord | None = None,
        previous: Mapping[str, str] | None = None,
        then: Callable[[str], None] | None = None,
    ) -> list[str]:
        """Each target still waiting for the request (``WAITS_FOR``) in ``status``, ``event`` written
        with the first that is (``Targets.finish``), ``then`` called for each right after its
        write: the targets written."""
        request = g.request
        written: list[str] = []
        for target in g.targets:
            if self._state.targets.finish(
                target,
                request.move.digest,
                status,
                now,
                trigger=trigger,
                detail=detail(target),
                previous_image=(previous or {}).get(target),
                correlation_id=request.move.correlation_id,
                expected=frozenset({WAITS_FOR[request.kind]}),
                extra=extra,
                event=None if written else event,
            ):
                written.append(target)
                if then is not None:
                    then(target)
        return written


def _holds(st: TargetState | None, request: WriteRequest, wanted: TargetStatus) -> bool:
    return st is not None and st.digest == request.move.digest and st.status is wanted


def _moved_on(st: TargetState | None, request: WriteRequest) -> bool:
    """A newer observation than the request's holds the target (or, for a revert, any other digest)."""
    if st is None or st.digest == request.move.digest:
        return False
    return request.kind is WriteKind.REVERT or st.observed_at > request.move.observed_at


def _edit(group: list[_Request], texts: Mapping[str, str | None]) -> dict[str, str]:
    """Every request's files, in the order the requests came; a request whose files cannot all be
    edited changes none of them (its error is kept for its targets)."""
    current = dict(texts)
    for g in group:
        g.error = None
        if not g.files:
            continue
        pin: Pin = g.request.pin()
        mine = dict(current)
        try:
            for file in g.files:
                text = mine.get(file.path)
                if text is None:
                    raise EditError(f"{file.path}: no such file on {g.request.branch}")
                try:
                    mine[file.path] = edit_file(text, pin, file).text
                except EditError as exc:
                    raise EditError(f"{file.path}: {exc}") from None
        except EditError as exc:
            g.error = f"{g.request.repository}: {exc}"
            continue
        current = mine
    return {path: text for path, text in current.items() if text is not None}


def _message(group: list[_Request]) -> str:
    """The commit message: a subject naming the references, then each request and its targets."""
    written = [g for g in group if g.files and g.error is None]
    names = [
        f"{'revert ' if g.request.kind is WriteKind.REVERT else ''}{_short(g.request.reference)}"
        for g in written
    ]
    subject = "tagpin: " + ", ".join(names)
    if len(subject) > SUBJECT_MAX:
        subject = f"tagpin: {len(written)} references ({names[0]}, ...)"
    body = []
    for g in written:
        r, move = g.request, g.request.move
        body.append(f"{r.kind.value} {r.reference}")
        body += [f"  {file.path} ({file.kind.value})" for file in g.files]
        body += [f"  target {t}" for t in g.targets]
        body.append(
            f"  trigger {move.trigger.value}"
            + (f", correlation id {move.correlation_id}" if move.correlation_id else "")
        )
        if r.reason:
            body.append("  why: " + "".join(c if c.isprintable() else "?" for c in r.reason))
    return subject + "\n\n" + "\n".join(body) + "\n"


def _short(reference: str) -> str:
    """``web:1.4@sha256:0123456789ab``: the last path part, the tag and 12 digits of the digest
    (``web:1.4``: a revert to the tag alone)."""
    name, at, digest = reference.partition("@")
    return f"{name.rsplit('/', 1)[-1]}{at}{digest[:19]}"


def _superseded(g: _Request) -> Written:
    return Written(WriteOutcome.SUPERSEDED, None, "no target waits for it any more", ())
