"""The write-back function's composition root (docs/gitops.md): the Git client, the tokens per
host and the ``Writer``, once per container; built on ``tagpin.wiring`` (the configuration, the
state table, the changes queue, the secret store), above it, so that no other function loads
dulwich (it ships in the write-back function's layer only).

``write_batch`` is the function's batch: its records parsed, grouped into one commit per
repository by the ``Writer``, and the records to deliver again reported with their delays.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from tagpin import wiring
from tagpin.domain.config import NotConfigured
from tagpin.domain.gitops.writes import WriteOutcome, WriteRequest, Written
from tagpin.domain.redelivery import PERMANENT
from tagpin.ports.git import Author
from tagpin.redelivery import back_off

if TYPE_CHECKING:
    from tagpin.adapters.git.credentials import GitTokens
    from tagpin.adapters.git.repositories import DulwichRepositories
    from tagpin.adapters.git.reviews import RestReviews
    from tagpin.usecases.writeback import Writer

logger = logging.getLogger(__name__)


@wiring.cached
def git_tokens() -> GitTokens:
    """A token per host from ``tagpin/git/`` secrets, for the pushes and the hosts' APIs alike."""
    from tagpin.adapters.git.credentials import GitTokens
    from tagpin.adapters.secrets import Secrets

    # read uncached: GitTokens keeps each token a minute and forgets one the server refuses
    fresh = Secrets(wiring.settings().secret_store, max_age=0)
    return GitTokens(lambda: wiring.config().gitops.hosts, fresh.text)


@wiring.cached
def git_repositories() -> DulwichRepositories:
    """The Git client: the host's token, connections kept warm."""
    from tagpin.adapters.git.repositories import DulwichRepositories

    tokens = git_tokens()
    return DulwichRepositories(tokens, forget=tokens.forget)


@wiring.cached
def review_requests() -> RestReviews:
    """Pull (merge) requests through GitHub's or GitLab's REST API, with the host's token."""
    from tagpin.adapters.git.reviews import RestReviews

    tokens = git_tokens()
    return RestReviews(lambda: wiring.config().gitops.hosts, tokens, forget=tokens.forget)


def author() -> Author:
    configured = wiring.config().gitops.author
    return Author(configured.name, configured.email)


@wiring.cached
def writer() -> Writer:
    from tagpin.usecases.writeback import Writer

    return Writer(
        repos=git_repositories(),
        reviews=review_requests(),
        state=wiring.state(),
        verifications=wiring.verification_queue(),
        settings=wiring.rollout_settings,
        author=author,
        clock=wiring.clock,
    )


def write_batch(event: dict[str, Any]) -> tuple[dict[str, Any], Counter[WriteOutcome]]:
    """The SQS batch's response (``batchItemFailures``) and what became of its requests. A record
    that is no request goes to the dead-letter queue at once; one whose request must be written
    again (``retry``) comes back on the redelivery schedule (``tagpin.domain.redelivery``)."""
    records = event.get("Records", [])
    queue_url = wiring.setting("writeback_queue_url")
    try:
        wiring.config()
    except NotConfigured as exc:  # deployed, not configured yet: everything waits, nothing fails loudly
        logger.warning("not configured yet; records left for later", extra={"reason": str(exc)})
        response = {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records]}
        back_off(response, records, queue_url, {})
        return response, Counter()
    later: dict[str, int] = {}
    parsed: list[tuple[str, WriteRequest]] = []
    for record in records:
        try:
            parsed.append((record["messageId"], WriteRequest.model_validate_json(record["body"])))
        except ValidationError as exc:
            logger.error(
                "not a write request", extra={"message_id": record["messageId"], "error": str(exc)[:500]}
            )
            later[record["messageId"]] = PERMANENT
    results: list[Written] = writer().write([request for _, request in parsed]) if parsed else []
    failed = list(later)
    failed += [
        message_id
        for (message_id, _), w in zip(parsed, results, strict=True)
        if w.outcome is WriteOutcome.RETRY
    ]
    response = {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}
    back_off(response, records, queue_url, later)
    return response, Counter(w.outcome for w in results)


def reset() -> None:
    """Close the repositories' connections (``wiring.reset`` then clears the cached factories)."""
    if git_repositories.cache_info().currsize:
        git_repositories().close()
    if review_requests.cache_info().currsize:
        review_requests().close()


wiring.RESETS.append(reset)
