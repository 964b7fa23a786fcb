"""A token answer's ``expires_in`` is the token server's JSON: a value that is no finite number (an
object, a list, a string, ``true``, ``NaN``, ``Infinity``, ``1e999``) or no positive one is the
default lifetime, and a number is kept within ``TOKEN_MIN_TTL``..``TOKEN_MAX_TTL``. Before, an
object or list made the answer "no token" (every resolution of the registry failed with an
AuthError), a negative or NaN one fetched a token for every request, and an infinite or huge one
kept the token until the registry refused it."""

from __future__ import annotations

import json

import pytest
from tagpin.adapters.registry.auth import TOKEN_DEFAULT_TTL, TOKEN_MARGIN, TOKEN_MAX_TTL, TOKEN_MIN_TTL
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.http import Headers, HttpResponse
from tagpin.ports.registry import RegistryAccess

from tests.support.clock import FakeClock
from tests.unit.test_registry_deep_json import REF, Transport, no_sleep

DIGEST = "sha256:" + "e" * 64
CHALLENGE = Headers([("WWW-Authenticate", 'Bearer realm="https://auth.example.com/token",service="r"')])


def registry(expires_in: str, clock: FakeClock[float]) -> tuple[RegistryClient, list[str]]:
    """A registry behind a token server whose answer carries ``expires_in`` (raw JSON text); the
    registry takes any token. The list: each token the server issued."""
    issued: list[str] = []

    def answer(url: str, authorization: str) -> HttpResponse:
        if url.startswith("https://auth.example.com/"):
            issued.append(f"tok-{len(issued) + 1}")
            body = f'{{"token": {json.dumps(issued[-1])}, "expires_in": {expires_in}}}'
            return HttpResponse(200, Headers([("Content-Type", "application/json")]), body.encode())
        if not authorization.startswith("Bearer tok-"):
            return HttpResponse(401, CHALLENGE)
        return HttpResponse(200, Headers([("Docker-Content-Digest", DIGEST)]))

    client = RegistryClient(lambda _r: RegistryAccess(), Transport(answer), sleep=no_sleep, clock=clock)
    return client, issued


def assert_token_lasts(expires_in: str, expected: float) -> None:
    """The client uses the token of an answer with ``expires_in`` for ``expected`` seconds of its
    clock: resolutions until just before then send the cached token, one just after fetches anew."""
    clock: FakeClock[float] = FakeClock(1000.0)
    client, issued = registry(expires_in, clock)
    with client:
        assert str(client.resolve(REF).digest) == DIGEST
        assert str(client.resolve(REF).digest) == DIGEST  # right away: the cached token
        assert issued == ["tok-1"]
        clock.advance(expected - 0.5)
        assert str(client.resolve(REF).digest) == DIGEST
        assert issued == ["tok-1"]
        clock.advance(1.0)
        assert str(client.resolve(REF).digest) == DIGEST
        assert issued == ["tok-1", "tok-2"]


DEFAULT = TOKEN_DEFAULT_TTL - TOKEN_MARGIN
NO_FINITE_NUMBER = ["{}", '{"seconds": 300}', "[]", "[300]", '"300"', "true", "null", "NaN", "Infinity"]
PAST_A_FLOAT = [pytest.param("1" + "0" * 400, id="1e400-int"), pytest.param("9" * 5000, id="5000-digits")]


@pytest.mark.parametrize("expires_in", [*NO_FINITE_NUMBER, "-Infinity", "1e999", *PAST_A_FLOAT])
def test_an_expires_in_that_is_no_finite_number_is_the_default(expires_in: str) -> None:
    assert_token_lasts(expires_in, DEFAULT)


@pytest.mark.parametrize("expires_in", ["0", "-1", "-300", "-1e999"])
def test_an_expires_in_that_is_not_positive_is_the_default(expires_in: str) -> None:
    assert_token_lasts(expires_in, DEFAULT)


@pytest.mark.parametrize("expires_in", ["0.001", "1", "5"])
def test_a_tiny_expires_in_is_raised_to_the_floor(expires_in: str) -> None:
    assert TOKEN_MIN_TTL > TOKEN_MARGIN  # the floor leaves the token cached for a while
    assert_token_lasts(expires_in, TOKEN_MIN_TTL - TOKEN_MARGIN)


@pytest.mark.parametrize("expires_in", ["86400", "1e9", "1e300"])
def test_a_huge_expires_in_is_capped(expires_in: str) -> None:
    assert_token_lasts(expires_in, TOKEN_MAX_TTL - TOKEN_MARGIN)


@pytest.mark.parametrize("expires_in", ["60", "300", "300.5"])
def test_a_sane_expires_in_is_kept(expires_in: str) -> None:
    assert_token_lasts(expires_in, float(expires_in) - TOKEN_MARGIN)
