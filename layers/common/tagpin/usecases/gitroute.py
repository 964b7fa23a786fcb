"""Route a change to Git (docs/gitops.md): the consumer's side of the write-back.

A target whose workload Argo CD or Flux owns is not patched live (``tagpin.usecases.admission.owner``); when
``gitops.write_back`` configures it, the Applier claims it as for a patch (the ordering claim: an
older digest never replaces a newer one), after every gate a live patch passes, and hands it here.
``send`` groups the change's targets by repository and branch and sends one ``WriteRequest`` per
group on the write-back queue, whose message group is the repository: 500 targets in 50
repositories are 50 messages, and 50 commits (``tagpin.usecases.writeback``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import GitOpsSettings, WriteBack, WriteBackFile, WriteMode
from tagpin.domain.gitops.pins import Pin
from tagpin.domain.gitops.writes import FileWrite, WriteKind, WriteRequest
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome, ApplyResult
from tagpin.domain.refs import Digest
from tagpin.ports.git import WriteQueue

logger = logging.getLogger(__name__)

type Group = tuple[str, str, WriteMode]  # repository, branch, mode


class GitRoute:
    """``queue`` None: no write-back queue in this function's environment, nothing is written
    back (an owned target is then refused as when nothing configures it)."""

    def __init__(self, gitops: Callable[[], GitOpsSettings], queue: WriteQueue | None) -> None:
        self._gitops = gitops
        self._queue = queue

    def writes(self, image: FollowedKey, target_id: str) -> bool:
        """True when ``gitops.write_back`` says where ``target_id``'s reference to ``image`` is written."""
        return self._queue is not None and bool(self._gitops().for_target(image, target_id))

    def entries(self, image: FollowedKey, target_id: str) -> list[WriteBack]:
        return self._gitops().for_target(image, target_id)

    def batch(self, change: Change, targets: Sequence[str]) -> GitBatch:
        """The change's requests, sent repository by repository as the Applier decides ``targets``."""
        return GitBatch(self, change, targets if self._queue is not None else ())

    def send(self, change: Change, results: Sequence[ApplyResult]) -> list[WriteRequest]:
        """One request per repository and branch for the targets of ``change`` the Applier left
        to Git (``write-back``; sent, and returned)."""
        move = change.move
        moved = [r for r in results if r.outcome is ApplyOutcome.WRITE_BACK and r.target]
        targets = [r.target for r in moved if r.target]
        previous = {r.target: r.previous_image for r in moved if r.target and r.previous_image}
        owners = {r.target: r.detail[:200] for r in moved if r.target and r.detail}
        if not targets:
            return []
        reference = str(Pin.of(move.source, move.digest).image)
        requests = [
            WriteRequest(
                kind=WriteKind.PIN,
                repository=repository,
                branch=branch,
                mode=mode,
                move=move,
                reference=reference,
                files=files,
                previous={t: previous[t] for f in files for t in f.targets if t in previous},
                owners={t: owners[t] for f in files for t in f.targets if t in owners},
            )
            for (repository, branch, mode), files in self._grouped(move.image, targets).items()
        ]
        self._send(requests)
        if requests:
            logger.info(
                "sent to Git",
                extra={"image": move.image, "digest": move.digest, "repositories": len(requests)},
            )
        return requests

    def revert(
        self,
        image: FollowedKey,
        digest: Digest,
        target_id: str,
        previous: str,
        observed_at: int,
        reason: str,
        correlation_id: str | None,
    ) -> list[WriteRequest]:
        """Write ``previous`` (the reference the workload ran before ``digest``) back where the
        target's reference is written (sent, and returned)."""
        move = Move(
            image=image,
            digest=Digest(digest),
            observed_at=observed_at,
            trigger=Trigger.ROLLBACK,
            correlation_id=correlation_id,
        )
        requests = [
            WriteRequest(
                kind=WriteKind.REVERT,
                repository=repository,
                branch=branch,
                mode=mode,
                move=move,
                reference=previous,
                reason=reason[:2000],
                files=files,
            )
            for (repository, branch, mode), files in self._grouped(image, [target_id]).items()
        ]
        self._send(requests)
        return requests

    def _send(self, requests: list[WriteRequest]) -> None:
        assert self._queue is not None, "sent only for the targets writes() said yes to"
        for request in requests:
            self._queue.send(request)

    def _grouped(self, image: FollowedKey, targets: Sequence[str]) -> dict[Group, tuple[FileWrite, ...]]:
        groups: dict[Group, dict[str, tuple[WriteBackFile, list[str]]]] = {}
        for target in targets:
            for entry in self.entries(image, target):
                files = groups.setdefault((entry.repository, entry.branch, entry.mode), {})
                for file in entry.files:
                    key = file.model_dump_json()
                    files.setdefault(key, (file, []))[1].append(target)
        return {
            group: tuple(FileWrite(file=file, targets=tuple(ts)) for file, ts in files.values())
            for group, files in groups.items()
        }


class GitBatch:
    """Sends a repository's request as soon as the Applier has decided every target of the change
    that the repository holds (``done``), so the first repositories' commits do not wait for the
    last targets of a large change; ``flush`` sends what is left (targets it never reached: out of
    time, deferred, held)."""

    def __init__(self, route: GitRoute, change: Change, targets: Sequence[str]) -> None:
        self._route, self._change = route, change
        self._group: dict[str, Group] = {}
        self._waiting: dict[Group, set[str]] = {}
        self._done: dict[Group, list[ApplyResult]] = {}
        for target in targets:
            entries = route.entries(change.move.image, target)
            if entries:  # one repository and branch per target (validated)
                group = (entries[0].repository, entries[0].branch, entries[0].mode)
                self._group[target] = group
                self._waiting.setdefault(group, set()).add(target)

    def done(self, result: ApplyResult) -> ApplyResult:
        group = self._group.get(result.target or "")
        if group is not None:
            self._done.setdefault(group, []).append(result)
            waiting = self._waiting[group]
            waiting.discard(result.target or "")
            if not waiting:
                self._route.send(self._change, self._done.pop(group))
        return result

    def flush(self) -> None:
        for group in list(self._done):
            self._route.send(self._change, self._done.pop(group))
