"""The dead-letter queue, for a person: what is in it (the console) and redriving it (``tagpin
redrive``, the console's Redrive button): one implementation for both.

Changes and verifications that failed every receive go back to the changes queue, keeping group and
body (a verification is due at once); the records of failed scheduled runs and ECR events are
listed and removed (there is nothing to send again: the next run repeats the work). Each message is
sent before it is deleted, so a failure half-way duplicates at worst (the consumer is idempotent)
and never loses one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError

from tagpin.domain.channels import FollowedKey
from tagpin.domain.deadletters import FailedRun, failed_invocation
from tagpin.domain.messages import Verification, parse_message
from tagpin.domain.refs import Digest
from tagpin.ports.queues import DeadLetter, DeadLetters

REDRIVE_HIDE_S = 60  # a message being redriven is hidden this long (sent back, then deleted)
LOOK_HIDE_S = 10  # a look hides what it read at most this long (released at once after it)
BODY_PREVIEW = 300  # characters of an unreadable body shown


@dataclass(frozen=True)
class Letter:
    """A dead-lettered change or verification, summarised."""

    message_id: str
    kind: str  # change, verify, advance, retry, or unreadable
    image: FollowedKey | None = None
    digest: Digest | None = None
    target: str | None = None
    trigger: str | None = None
    preview: str | None = None  # an unreadable body's beginning


@dataclass(frozen=True)
class Look:
    """What the dead-letter queue holds: its approximate size and the first messages."""

    count: int
    letters: list[Letter] = field(default_factory=list)
    failed_runs: list[FailedRun] = field(default_factory=list)
    truncated: bool = False  # more messages than were read


@dataclass(frozen=True)
class Redriven:
    moved: int
    failed_runs: list[FailedRun]


def summary(letter: DeadLetter) -> Letter:
    try:
        message = parse_message(letter.body)
    except (ValidationError, ValueError):
        return Letter(letter.message_id, "unreadable", preview=letter.body[:BODY_PREVIEW])
    if isinstance(message, Verification):
        return Letter(
            letter.message_id,
            str(message.kind),
            image=message.move.image,
            digest=message.move.digest,
            target=message.target_id,
            trigger=str(message.move.trigger),
        )
    return Letter(
        letter.message_id,
        "change",
        image=message.move.image,
        digest=message.move.digest,
        trigger=str(message.move.trigger),
    )


class DeadLetterQueue:
    def __init__(self, letters: DeadLetters) -> None:
        self._letters = letters

    def look(self, limit: int = 30) -> Look:
        """The first ``limit`` messages, summarised. They are hidden while being read and made
        visible again at once: a look changes nothing (a redrive running at the same moment may
        miss them for a few seconds and take them next time)."""
        count = self._letters.count()
        read: list[DeadLetter] = []
        seen: set[str] = set()
        try:
            while len(read) < limit:
                batch = [
                    m
                    for m in self._letters.receive(min(10, limit - len(read)), LOOK_HIDE_S)
                    if m.message_id not in seen
                ]
                if not batch:
                    break
                seen.update(m.message_id for m in batch)
                read.extend(batch)
        finally:
            if read:
                self._letters.release(read)
        letters: list[Letter] = []
        runs: list[FailedRun] = []
        for message in read:
            run = failed_invocation(message.body)
            if run is not None:
                runs.append(run)
            else:
                letters.append(summary(message))
        return Look(count, letters, runs, truncated=count > len(read))

    def redrive(self, limit: int | None = None) -> Redriven:
        """Move up to ``limit`` messages (all when None): changes and verifications back to the
        changes queue, failed runs' records listed and removed."""
        moved = 0
        failed: list[FailedRun] = []
        while limit is None or moved + len(failed) < limit:
            want = 10 if limit is None else max(1, min(10, limit - moved - len(failed)))
            batch = self._letters.receive(want, REDRIVE_HIDE_S, wait_s=1)
            if not batch:
                break
            for message in batch:
                run = failed_invocation(message.body)
                if run is not None:
                    failed.append(run)
                else:
                    self._letters.send_back(message)
                    moved += 1
                self._letters.delete(message)
        return Redriven(moved, failed)
