"""Many resolutions at once (``RegistryClient.resolve_many``, the poller's batches): a registry that
answers nothing is cut, a registry that answers, however slowly, is not, and neither holds up the
others. Through the client, with a transport that answers per host after a delay, or never (then it
times out after the request's timeout, as aiohttp does)."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.http import Headers, HttpRequest, HttpResponse, TransportError
from tagpin.adapters.registry.resilience import RetryPolicy
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import RegistryError, RegistryUnavailable, Resolution

DIGEST = "sha256:" + "a" * 64
DEADLINE = 0.2  # the registries' deadline in these tests
SILENT = "no answer to any request"


def refs(host: str, n: int) -> list[ImageRef]:
    return [ImageRef.parse(f"{host}/app{i}:stable") for i in range(n)]


class Registries:
    """Answers each host after ``delays[host]`` seconds (0 when not listed); never when the delay is
    None or not shorter than the request's timeout: then the request times out. ``first`` answers,
    per host, come first (e.g. a 429); every request is logged as (event, host, path)."""

    def __init__(
        self, delays: dict[str, float | None], first: dict[str, list[HttpResponse]] | None = None
    ) -> None:
        self.delays = delays
        self.first = first or {}
        self.log: list[tuple[str, str, str]] = []

    def sent(self, host: str) -> int:
        return sum(1 for event, h, _p in self.log if event == "sent" and h == host)

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        url = urlsplit(request.url)
        self.log.append(("sent", url.netloc, url.path))
        delay = self.delays.get(url.netloc, 0.0)
        if url.path.endswith("/straggler/manifests/stable"):  # this one tag is never answered
            delay = None
        if delay is None or delay >= timeout:
            await asyncio.sleep(timeout)
            self.log.append(("timed out", url.netloc, url.path))
            raise TransportError(f"timed out after {timeout:.1f}s", timeout=True)
        await asyncio.sleep(delay)
        self.log.append(("answered", url.netloc, url.path))
        if self.first.get(url.netloc):
            return self.first[url.netloc].pop(0)
        return HttpResponse(200, Headers({"docker-content-digest": DIGEST}.items()), b"")

    async def close(self) -> None:
        pass


def client(transport: Registries, **kw: object) -> RegistryClient:
    kw.setdefault("registry_deadline", DEADLINE)
    kw.setdefault("timeout", 1.0)
    kw.setdefault("retry", RetryPolicy(attempts=3, base=0.01, cap=0.02))
    return RegistryClient(transport=transport, **kw)  # type: ignore[arg-type]


def resolved(results: dict[ImageRef, Resolution | RegistryError], wanted: list[ImageRef]) -> bool:
    return all(isinstance(results[r], Resolution) for r in wanted)


def test_a_registry_answering_every_request_after_the_deadline_is_never_cut() -> None:
    """Each request answered in the deadline + 0.1 s, four at a time, alone and beside a fast one:
    all its tags resolve, batch after batch (its breaker stays closed)."""
    slow, fast = refs("slow.example.com", 12), refs("fast.example.com", 3)
    transport = Registries({"slow.example.com": DEADLINE + 0.1})
    with client(transport, per_registry=4) as c:
        alone = c.resolve_many(slow)
        beside = c.resolve_many(slow + fast)
    assert resolved(alone, slow)
    assert resolved(beside, slow + fast)
    assert transport.sent("slow.example.com") == 24  # each tag asked once per batch, never retried


def test_a_429_waited_out_longer_than_the_deadline_is_an_answer() -> None:
    """A registry whose answer is "429, Retry-After: 1" waits 1 s (> the deadline) and goes on."""
    limited = refs("limited.example.com", 1)
    too_many = HttpResponse(429, Headers({"retry-after": "1"}.items()), b"")
    transport = Registries({}, first={"limited.example.com": [too_many]})
    with client(transport, timeout=5.0) as c:
        results = c.resolve_many(limited)
    assert resolved(results, limited)
    assert transport.sent("limited.example.com") == 2


def test_a_straggler_of_a_registry_that_answers_is_retried_and_does_not_open_its_breaker() -> None:
    """One tag whose requests time out, beside tags the same registry answers: that tag fails after
    its tries (an ordinary failure), the others resolve, and the next batch asks the registry again."""
    host = "mixed.example.com"
    ok = refs(host, 3)
    straggler = ImageRef.parse(f"{host}/straggler:stable")
    transport = Registries({})
    with client(transport, timeout=0.5) as c:
        first = c.resolve_many([*ok, straggler])
        second = c.resolve_many(ok)
    assert resolved(first, ok) and resolved(second, ok)
    error = first[straggler]
    assert isinstance(error, RegistryError) and "timed out" in str(error) and SILENT not in str(error)
    assert sum(1 for e, _h, p in transport.log if e == "sent" and "straggler" in p) == 3  # its 3 tries


def test_a_frozen_registry_is_cut_at_its_first_timeout_and_skipped_by_the_next_batch() -> None:
    """A registry that answers nothing: its requests are not retried, its tags get that error, the
    other registry's tags resolve, and the next batch does not ask it until the cooldown."""
    fast, frozen = refs("fast.example.com", 3), refs("frozen.example.com", 2)
    transport = Registries({"frozen.example.com": None})
    with client(transport, breaker_cooldown=60) as c:
        first = c.resolve_many(fast + frozen)
        second = c.resolve_many(fast + frozen)
    assert resolved(first, fast) and resolved(second, fast)
    for ref in frozen:
        assert isinstance(first[ref], RegistryError) and str(first[ref]).startswith(
            f"frozen.example.com: {SILENT} in this poll"
        ), first[ref]
        assert isinstance(second[ref], RegistryUnavailable) and "skipped" in str(second[ref])
        assert SILENT in str(second[ref])
    assert transport.sent("frozen.example.com") == 2  # once each, never retried, not asked again


def test_frozen_registries_holding_every_global_slot_do_not_starve_a_fast_one() -> None:
    """Two frozen registries whose requests fill the global slots (2 x 2 of 4), asked first, and a
    fast registry behind them: the fast one's tags resolve in the same batch, all sent before any
    frozen request timed out (a registry silent for its deadline gives its global slots back), and
    the next batch asks it again."""
    frozen = refs("frozen-a.example.com", 4) + refs("frozen-b.example.com", 4)
    fast = refs("zfast.example.com", 4)
    transport = Registries({"frozen-a.example.com": None, "frozen-b.example.com": None})
    with client(transport, max_concurrency=4, per_registry=2) as c:
        first = c.resolve_many(frozen + fast)
        second = c.resolve_many(fast)
    assert resolved(first, fast) and resolved(second, fast)
    assert all(isinstance(first[r], RegistryError) and SILENT in str(first[r]) for r in frozen)
    first_timeout = next(i for i, (event, _h, _p) in enumerate(transport.log) if event == "timed out")
    before = transport.log[:first_timeout]
    assert sorted(e for e, h, _p in before if h == "zfast.example.com") == ["answered"] * 4 + ["sent"] * 4
    assert transport.sent("frozen-a.example.com") == transport.sent("frozen-b.example.com") == 2


def test_the_batch_deadline_leaves_the_rest_out_without_blaming_a_registry() -> None:
    """What is unresolved at the batch's deadline, asked or not, is left for the next run: not an
    error, and no breaker opens."""
    fast, frozen = refs("fast.example.com", 3), refs("frozen.example.com", 2)
    waiting = refs("waiting.example.com", 2)
    transport = Registries({"frozen.example.com": None, "waiting.example.com": 5.0})
    with client(transport, timeout=10.0, registry_deadline=30.0) as c:
        out = c.resolve_many(fast + frozen + waiting, deadline=time.monotonic() + 0.3)
        again = c.resolve_many(fast)
    assert set(out) == set(fast) and resolved(out, fast) and resolved(again, fast)
    assert c.breaker("frozen.example.com").open_until == 0.0


def test_only_the_registrys_own_answers_count() -> None:
    from tagpin.adapters.registry.batch import _addressed_to

    assert _addressed_to("https://r.example.com/v2/a/manifests/b", "r.example.com")
    assert _addressed_to("http://127.0.0.1:5000/v2/", "127.0.0.1:5000")
    assert _addressed_to("http://127.0.0.1:5000", "127.0.0.1:5000")
    assert not _addressed_to("http://127.0.0.1:50001/v2/", "127.0.0.1:5000")  # another port
    assert not _addressed_to("https://auth.example.com/token?scope=x", "r.example.com")  # its token server
    assert not _addressed_to("https://r.example.com.evil.net/v2/", "r.example.com")
