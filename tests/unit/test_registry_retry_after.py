"""A 429's ``Retry-After`` is the registry's text: a value that is no number of seconds is ignored
(before, a digit Python's ``isdigit`` accepts and ``float`` refuses, such as ``²``, failed the
resolution with a ``ValueError``), and a huge one is capped at ``MAX_RETRY_AFTER`` (before, 400
nines were an infinite wait: the registry's circuit stayed open for the warm container's life,
every tag of it skipped on every poll)."""

from __future__ import annotations

import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.http import Headers, HttpResponse
from tagpin.adapters.registry.resilience import MAX_RETRY_AFTER, RetryPolicy
from tagpin.ports.registry import RegistryAccess, RegistryError, RegistryUnavailable

from tests.unit.test_registry_deep_json import REF, Transport, no_sleep

DIGEST = "sha256:" + "d" * 64


def registry(retry_after: str, now: list[float]) -> tuple[RegistryClient, list[str]]:
    """A registry that answers 429 with ``retry_after`` until ``now`` passes 1000, then the digest."""
    asked: list[str] = []

    def answer(url: str, _authorization: str) -> HttpResponse:
        asked.append(url)
        if now[0] < 1000:
            return HttpResponse(429, Headers([("Retry-After", retry_after)]))
        return HttpResponse(200, Headers([("Docker-Content-Digest", DIGEST)]))

    client = RegistryClient(
        lambda _r: RegistryAccess(),
        Transport(answer),
        sleep=no_sleep,
        clock=lambda: now[0],
        retry=RetryPolicy(attempts=1),
    )
    return client, asked


@pytest.mark.parametrize("value", ["\u00b2", "\u00b9\u00b2\u2070"])
def test_a_retry_after_that_is_no_number_is_ignored(value: str) -> None:
    with registry(value, [0.0])[0] as client, pytest.raises(RegistryError) as caught:
        client.resolve(REF)
    assert (caught.value.status, caught.value.retry_after) == (429, None)


def test_a_huge_retry_after_is_capped() -> None:
    now = [0.0]
    client, asked = registry("9" * 400, now)
    with client:
        with pytest.raises(RegistryError) as caught:
            client.resolve(REF)
        assert caught.value.retry_after == MAX_RETRY_AFTER
        now[0] = 1000.0
        with pytest.raises(RegistryUnavailable):  # the circuit is open: not asked
            client.resolve(REF)
        now[0] = MAX_RETRY_AFTER + 1
        assert str(client.resolve(REF).digest) == DIGEST
    assert len(asked) == 2
