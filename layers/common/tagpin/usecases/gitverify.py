"""The write-back's verifications: a target recorded ``applied`` by a commit is followed by a delayed
verification carrying that commit (the verifier waits for the GitOps tool to apply it:
``tagpin.usecases.verify``).

The record and the send are two writes to two services (DynamoDB, SQS): a write-back that stops
between them (a Lambda timeout, SQS unreachable) leaves the target applied with no verification, and
its request, delivered again, finds nothing waiting (``WAITS_FOR``) and writes nothing. So a pin
request delivered again sends the verification again for each of its targets already applied at
its digest, with the commit its state recorded (``TargetState.commit``, read with the states the
write-back reads anyway: no request added, no permission the function did not have), as the
consumer does for a target it finds already current. A verification twice is safe: the first to
decide wins (a conditional write on ``applied``), the other finds it decided."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tagpin.domain.config import RolloutSettings
from tagpin.domain.gitops.writes import WriteKind, WriteRequest
from tagpin.domain.messages import Verification, VerificationKind
from tagpin.ports.queues import VerificationQueue
from tagpin.ports.state import TargetState, TargetStatus

logger = logging.getLogger(__name__)


class WriteVerifications:
    def __init__(
        self, verifications: VerificationQueue | None, settings: Callable[[], RolloutSettings]
    ) -> None:
        self._verifications = verifications
        self._settings = settings

    def send(self, request: WriteRequest, target: str, commit: str, now: int) -> None:
        """A delayed verification of ``target``, applied by ``commit``."""
        settings = self._settings()
        if self._verifications is not None and settings.verify:
            verification = Verification(
                kind=VerificationKind.VERIFY,
                move=request.move,
                target_id=target,
                applied_at=now,
                commit=commit,
            )
            self._verifications.send(verification, settings.verify_interval_seconds)

    def again(self, request: WriteRequest, states: Mapping[str, TargetState], now: int) -> list[str]:
        """A pin request delivered again: the verification of each target it already applied,
        sent again (see the module). The targets it was sent for."""
        if request.kind is not WriteKind.PIN or self._verifications is None or not self._settings().verify:
            return []
        sent = []
        for target in request.targets:
            st = states.get(target)
            if st is None or st.digest != request.move.digest or st.status is not TargetStatus.APPLIED:
                continue
            commit = st.commit
            if commit is None:  # applied otherwise than by a commit: not this request's to verify
                continue
            self.send(request, target, commit, now)
            sent.append(target)
        if sent:
            logger.info("verification sent again", extra={"targets": sent, "digest": request.move.digest})
        return sent
