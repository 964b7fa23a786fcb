"""Listing a repository's tags: requests, wall time and peak Python memory at 10,000 tags.

One manifest pushed under N tags (default 10,000) to the real local registry (``push_image`` once,
then ``put_tags``), then ``RegistryClient.list_tags`` with its default limits (n=1000) in a fresh
interpreter per scenario, so that tracemalloc sees the client only:

* registry: distribution 2.8.2 itself, which ignores ``n`` and sends every tag in one page;
* link-1000: through ``TagPager`` (127.0.0.1, in this process), which paginates as the OCI spec
  says: pages of n in lexical order, a Link to the next;
* link-cap-100: ``TagPager`` capping pages at 100 whatever n asks (GHCR's default), with a Link;
* last-1000: ``TagPager`` without Links (registries that paginate by ``last=`` alone): full pages
  are followed by ``last=``, and 10,000 being a multiple of 1,000 costs one empty page more.

Per scenario: requests and pages of one listing; wall time of the first listing of a fresh client
(loop thread, aiohttp import and connection included) and the median of ``--repeats`` listings on
the warm client; the process's CPU time per warm listing (the client; the registry and the front
run in other processes or this one); and the peak of Python allocations during one warm listing
(tracemalloc, in a run of its own: tracing slows allocation), next to the size of the result.

Usage:  .venv/bin/python bench/tags.py [--tags 10000] [--repeats 5]
Writes bench/results/tags.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "tags.json"
sys.path[:0] = [str(ROOT / "layers" / "common"), str(ROOT / "tools")]

REPOSITORY = "bench/tags"
SCENARIOS: dict[str, dict[str, Any] | None] = {  # None: the registry itself; else TagPager's options
    "registry": None,
    "link-1000": {},
    "link-cap-100": {"cap": 100},
    "last-1000": {"link": False},
}


def tag_names(n: int) -> list[str]:
    return [f"{i // 10_000}.{i // 100 % 100}.{i % 100}" for i in range(n)]


# --- the measurement (a fresh interpreter per scenario) ---------------------------------------------


def measure(host: str, repository: str, repeats: int) -> dict[str, Any]:
    import tracemalloc

    from tagpin.adapters.registry.client import RegistryClient
    from tagpin.domain.refs import ImageRef
    from tagpin.ports.registry import RegistryAccess, TagLister

    ref = ImageRef.parse(f"{host}/{repository}")
    with RegistryClient(access=lambda _host: RegistryAccess(insecure=True)) as client:
        lister: TagLister = client  # the port the use cases will see
        started = time.perf_counter()
        first = lister.list_tags(ref)
        cold = time.perf_counter() - started
        walls, cpus = [], []
        for _ in range(repeats):
            started, cpu = time.perf_counter(), time.process_time()
            listing = lister.list_tags(ref)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
            assert listing.tags == first.tags
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        traced = lister.list_tags(ref)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    result_bytes = sys.getsizeof(traced.tags) + sum(sys.getsizeof(t) for t in traced.tags)
    return {
        "tags": len(first.tags),
        "requests": first.requests,
        "pages": first.pages,
        "end": first.end,
        "first_ms": round(cold * 1000, 1),
        "warm_median_ms": round(statistics.median(walls) * 1000, 1),
        "warm_best_ms": round(min(walls) * 1000, 1),
        "cpu_ms": round(statistics.median(cpus) * 1000, 1),
        "peak_python_mb": round(peak / 2**20, 2),
        "result_mb": round(result_bytes / 2**20, 2),
    }


# --- setup and report ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tags", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--measure", nargs=2, metavar=("HOST", "REPOSITORY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        host, repository = args.measure
        print(json.dumps(measure(host, repository, args.repeats)))
        return 0

    from tagpin_local.oci import push_image, put_tags
    from tagpin_local.registry_server import RegistryServer
    from tagpin_local.tagpager import TagPager

    names = tag_names(args.tags)
    rows: list[dict[str, Any]] = []
    with RegistryServer() as registry:
        started = time.monotonic()
        push_image(registry.url, REPOSITORY, names[0], content=b"bench tags")
        put_tags(registry.url, REPOSITORY, names[0], names[1:])
        pushed = time.monotonic() - started
        print(f"{args.tags:,} tags pushed in {pushed:.1f}s", flush=True)
        for name, options in SCENARIOS.items():
            front = TagPager(registry.url, **options) if options is not None else None
            with front or nullcontext():
                host = front.host if front is not None else registry.host
                child = subprocess.run(
                    [sys.executable, __file__, "--measure", host, REPOSITORY, "--repeats", str(args.repeats)],
                    capture_output=True,
                    text=True,
                    check=True,
                    timeout=600,
                )
            row = {"scenario": name, **json.loads(child.stdout.strip().splitlines()[-1])}
            assert row["tags"] == args.tags, row  # end: "max-tags" at exactly 100,000 by last= (unconfirmed)
            rows.append(row)

    header = (
        f"{'scenario':<13} {'tags':>7} {'requests':>8} {'pages':>5} {'end':>9} {'first ms':>9} "
        f"{'warm ms':>8} {'best ms':>8} {'CPU ms':>7} {'peak MB':>8} {'result MB':>9}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['scenario']:<13} {r['tags']:>7,} {r['requests']:>8} {r['pages']:>5} {r['end']:>9} "
            f"{r['first_ms']:>9} {r['warm_median_ms']:>8} {r['warm_best_ms']:>8} {r['cpu_ms']:>7} "
            f"{r['peak_python_mb']:>8} {r['result_mb']:>9}"
        )
    RESULTS.write_text(
        json.dumps(
            {
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                },
                "tags": args.tags,
                "repeats": args.repeats,
                "push_seconds": round(pushed, 1),
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
