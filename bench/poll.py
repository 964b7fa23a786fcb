"""Poll throughput against the real local registry, next to its ceiling and to a skopeo loop.

For N = 100, 1,000, 10,000 followed tags (one manifest pushed under many tags across N/100
repositories), ``Poller.run`` as the handler runs it (the aiohttp registry client, the real
Detector, state in a moto server in its own process), in a fresh interpreter per run so that peak
RSS is that run's, in three states of the table (``bench/pollsetup.py`` writes them):

* steady: what every scheduled poll meets (nothing moved; every tag in the settled digests, as
  the polls before left them). Checked after the run: no write (a library before 2026-11-27: but the
  cursor), one read of the settled digests; a bench that no longer measures the steady state fails here;
* settling: the tags' and targets' items, no settled digests (a store written before they
  existed, or a poll that has not finished yet): every tag read, found unchanged, settled;
* moved: every tag moved since the last poll (its targets behind): every tag recorded and a
  change enqueued for it (an in-memory queue);

beside them, in the same run:

* ceiling: ``wrk`` GETs of the same N manifests (32 connections; wrk cannot do HEAD: it waits for
  the body that Content-Length announces), 5 s before and after each of 3 steady polls (on a shared
  machine the ceiling moves with the load: each poll is compared with the measures around it, the
  medians are reported and every sample kept); the ceiling over the skopeo loop is what any client
  of this registry could reach over skopeo here;
* skopeo: ``skopeo inspect --raw`` per tag, sequentially, on a sample of the tags (its cost per
  tag is a process start and a fresh connection, whatever N is);
* with 50 ms injected per request (the fault proxy), N = 1,000, steady: concurrency, not CPU,
  bounds it.

Where the time goes: CPU seconds of the poller, the moto server and the registry during the poll,
DynamoDB calls by operation, and the registry client alone on the same tags.

Usage:  .venv/bin/python bench/poll.py [--sizes 100,1000,10000] [--scenarios steady,settling,moved]
Writes bench/results/poll.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "poll.json"
# --code DIR: the library measured is DIR's (an export of another commit's layers/common, for a
# before/after in one run); the setup always uses this tree's.
OWN = str(ROOT / "layers" / "common")
CODE = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else OWN
sys.path[:0] = [CODE if "--worker" in sys.argv else OWN, str(ROOT / "tools"), str(ROOT)]

import boto3  # noqa: E402
import httpx  # noqa: E402

from bench.pollsetup import (  # noqa: E402
    CONCURRENCY,
    OLD,
    ceiling,
    images,
    populate_registry,
    populate_state,
    skopeo_rate,
    stop,
)

LATENCY = 0.05
SCENARIOS = ("steady", "settling", "moved")
ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
TARGETS = {"ceiling_ratio": 0.7, "skopeo_ratio": 20, "seconds_10000": 15, "peak_rss_mb": 256}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM, which a new program starts afresh (ru_maxrss
    keeps the parent's from before the exec: every worker reported the bench's own 127 MB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def collect_as_the_poller() -> None:
    """The poller's garbage collector settings, as its handler sets them when it loads, before its
    first invocation imports the rest (a library measured with ``--code`` from before they existed
    runs without)."""
    try:
        from tagpin.wiring.poll_gc import collect_for_polls
    except ImportError:
        return
    collect_for_polls()


def worker(args: argparse.Namespace) -> None:
    """One measured poll of ``args.table`` in this (fresh) process, after a poll of 20 tags of the
    steady table (connections and clients warm, as in a warm container); prints one JSON line."""
    collect_as_the_poller()  # before the library's imports, as the handler (its own imports only)
    from tagpin.adapters.dynamodb import dynamodb_state
    from tagpin.adapters.registry.client import RegistryClient
    from tagpin.domain.channels import FollowedKey
    from tagpin.domain.config import FollowedImage, Registry, Target
    from tagpin.ports.registry import RegistryAccess
    from tagpin.usecases.detect import Detector
    from tagpin.usecases.poll import Poller

    from tests.support.queues import ListQueue

    db = boto3.client("dynamodb", endpoint_url=args.aws, region_name="us-east-1")
    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def count(**kwargs: Any) -> None:
        with lock:
            calls[kwargs["model"].name] += 1

    db.meta.events.register("before-call.dynamodb", count)
    followed = []
    for image in images(args.host, args.n):
        repo, tag = image.rsplit("/", 1)[-1].split(":")
        followed.append(
            FollowedImage(
                image=FollowedKey(image),
                targets=[Target(cluster="bench", name=f"{repo}-{tag}", container="app")],
            )
        )
    queue = ListQueue()
    with RegistryClient(
        access=lambda _h: RegistryAccess(insecure=True), max_concurrency=64, per_registry=CONCURRENCY
    ) as client:

        def poller(table: str) -> Poller:
            state = dynamodb_state(db, table)
            return Poller(Detector(client, state, queue), client, state, lambda _h: Registry(insecure=True))

        warm = poller(args.warm_table)  # the handler's is one per container (tagpin.wiring): kept
        warm.run(followed[:20])
        calls.clear()
        queue.sent.clear()
        pids = {"poller": os.getpid(), "moto": args.moto_pid, "registry": args.registry_pid}
        cpu_before = {k: cpu_seconds(p) for k, p in pids.items() if p}
        started = time.perf_counter()
        measured = warm if args.table == args.warm_table else poller(args.table)
        summary = measured.run(followed, remaining_ms=lambda: 900_000)
        seconds = time.perf_counter() - started
        cpu = {k: round(cpu_seconds(p) - cpu_before[k], 2) for k, p in pids.items() if p}
        poll_calls = dict(sorted(calls.items()))
        settled = len(dynamodb_state(db, args.table).digests.all())
        resolve_per_s = 0.0
        if args.resolve_only:
            started = time.perf_counter()
            assert len(client.resolve_many([f.ref for f in followed])) == len(followed)
            resolve_per_s = args.n / (time.perf_counter() - started)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "tags_per_s": args.n / seconds,
                "peak_rss_mb": peak_rss_mb(),
                "counts": summary.counts(),
                "enqueued_messages": len(queue.sent),
                "cpu_s": cpu,
                "dynamodb_calls": poll_calls,
                "settled_after": settled,
                "resolve_only_per_s": resolve_per_s,
            }
        )
    )


def run_worker(
    n: int, table: str, host: str, aws: str, pids: dict[str, int], resolve_only: bool = False
) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--worker", "--n", str(n), "--table", table, "--warm-table", "steady"]
    argv += ["--code", CODE]
    argv += [
        "--host",
        host,
        "--aws",
        aws,
        "--moto-pid",
        str(pids.get("moto", 0)),
        "--registry-pid",
        str(pids.get("registry", 0)),
    ]
    if resolve_only:
        argv.append("--resolve-only")
    out = subprocess.run(
        argv, capture_output=True, text=True, check=False, env={**os.environ, **ENV}, timeout=3600
    )
    if out.returncode != 0:
        raise RuntimeError(f"worker failed: {out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def check(scenario: str, n: int, result: dict[str, Any]) -> None:
    """What each scenario must have done: else the bench measured something else."""
    counts, calls = result["counts"], result["dynamodb_calls"]
    if scenario == "steady":
        assert counts["unchanged"] == n and result["settled_after"] >= n, result
        writes = {k: v for k, v in calls.items() if k not in ("BatchGetItem", "GetItem", "Query")}
        assert writes in ({}, {"PutItem": 1}), f"a steady poll wrote more than its cursor: {calls}"
        assert calls.get("BatchGetItem") == 1, f"a steady poll read more than the settled digests: {calls}"
    elif scenario == "settling":
        assert counts["unchanged"] == n and result["settled_after"] == n, result
    else:
        assert counts["changed"] == n and result["enqueued_messages"] == n, result


def row(scenario: str, n: int, result: dict[str, Any]) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "n": n,
        "tags_per_s": round(result["tags_per_s"], 1),
        "seconds": round(result["seconds"], 2),
        "peak_rss_mb": round(result["peak_rss_mb"], 1),
        "cpu_s": result["cpu_s"],
        # where the poll's CPU went, per tag: what the poller's own work costs beside the registry's
        "cpu_us_per_tag": {k: round(v / n * 1e6) for k, v in result["cpu_s"].items()},
        "dynamodb_calls": result["dynamodb_calls"],
        "counts": result["counts"],
    }


def steady_row(
    n: int, registry: Any, aws: str, pids: dict[str, int], repeats: int, skopeo_sample: int
) -> dict[str, Any]:
    """The steady poll ``repeats`` times, each between two 5 s measures of the registry's ceiling
    (the one after a poll is the one before the next): on a shared machine the ceiling moves with
    the load from one measure to the next (2x within seconds at load 10), so each poll is compared
    with the two around it. The row is the median poll; the ratio the median of the polls' ratios;
    every sample is kept."""
    ceilings = [ceiling(registry.url, n)]
    results: list[dict[str, Any]] = []
    for _ in range(repeats):
        result = run_worker(n, "steady", registry.host, aws, pids, resolve_only=True)
        check("steady", n, result)
        results.append(result)
        ceilings.append(ceiling(registry.url, n))
    ratios = [r["tags_per_s"] / ((ceilings[i] + ceilings[i + 1]) / 2) for i, r in enumerate(results)]
    r = row("steady", n, sorted(results, key=lambda x: x["tags_per_s"])[len(results) // 2])
    r["peak_rss_mb"] = round(max(x["peak_rss_mb"] for x in results), 1)
    r["runs_tags_per_s"] = [round(x["tags_per_s"], 1) for x in results]
    r["ceilings_per_s"] = [round(c, 1) for c in ceilings]
    r["ceiling_per_s"] = round(statistics.median(ceilings), 1)
    r["ceiling_ratio"] = round(statistics.median(ratios), 3)
    r["skopeo_per_s"] = round(skopeo_rate(registry.host, n, min(n, skopeo_sample)), 2)
    r["skopeo_ratio"] = round(r["tags_per_s"] / r["skopeo_per_s"], 1)
    # what any client of this registry could reach over a skopeo loop here
    r["ceiling_skopeo_ratio"] = round(r["ceiling_per_s"] / r["skopeo_per_s"], 1)
    r["resolve_only_per_s"] = round(statistics.median(x["resolve_only_per_s"] for x in results), 1)
    return r


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--skopeo-sample", type=int, default=40)
    parser.add_argument(
        "--repeats", type=int, default=3, help="steady polls per size (the median is reported)"
    )
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--table", default="steady")
    parser.add_argument("--warm-table", default="steady")
    parser.add_argument("--host", default="")
    parser.add_argument("--aws", default="")
    parser.add_argument("--moto-pid", type=int, default=0)
    parser.add_argument("--registry-pid", type=int, default=0)
    parser.add_argument("--resolve-only", action="store_true")
    parser.add_argument("--code", default=CODE, help="the library to measure (default: this tree's)")
    parser.add_argument("--results", default=str(RESULTS), help="where to write the results")
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    from tagpin_local.faultproxy import FaultProxy
    from tagpin_local.registry_server import RegistryServer, free_port

    sizes = sorted(int(s) for s in args.sizes.split(","))
    scenarios = [s for s in args.scenarios.split(",") if s]
    port = free_port()
    moto = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **ENV},
    )
    aws = f"http://127.0.0.1:{port}"
    rows: list[dict[str, Any]] = []
    try:
        with RegistryServer() as registry:
            deadline = time.monotonic() + 20
            while True:
                try:
                    httpx.get(aws + "/moto-api/", timeout=1)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            pids = {"moto": moto.pid, "registry": registry.pid or 0}
            started = time.perf_counter()
            pushed = max(*sizes, 1000)  # the latency run polls 1,000
            digest = populate_registry(registry.url, pushed)
            print(f"pushed {pushed} tags in {time.perf_counter() - started:.1f}s", flush=True)
            os.environ.update(ENV)
            started = time.perf_counter()
            for n in sizes:
                if "settling" in scenarios:
                    populate_state(aws, f"settling-{n}", registry.host, n, digest, settled=False)
                if "moved" in scenarios:
                    populate_state(aws, f"moved-{n}", registry.host, n, OLD, settled=True)
            print(f"state written in {time.perf_counter() - started:.1f}s", flush=True)
            with FaultProxy(registry.url, latency=LATENCY) as proxy:
                populate_state(aws, "latency", proxy.host, 1000, digest, settled=True)
                steady = 0  # tags in the steady table so far: it grows with N
                for n in sizes:
                    populate_state(aws, "steady", registry.host, n, digest, settled=True, start=steady)
                    steady = n
                    for scenario in scenarios:
                        table = "steady" if scenario == "steady" else f"{scenario}-{n}"
                        if scenario == "steady":
                            r = steady_row(n, registry, aws, pids, args.repeats, args.skopeo_sample)
                        else:
                            result = run_worker(n, table, registry.host, aws, pids)
                            check(scenario, n, result)
                            r = row(scenario, n, result)
                        rows.append(r)
                        print(json.dumps(r), flush=True)
                latency = run_worker(1000, "latency", proxy.host, aws, {})
                check("steady", 1000, latency)
    finally:
        stop(moto)
    latency_row = {
        "n": 1000,
        "injected_latency_ms": LATENCY * 1000,
        "per_registry_concurrency": CONCURRENCY,
        "tags_per_s": round(latency["tags_per_s"], 1),
        "bound_per_s": round(CONCURRENCY / LATENCY, 1),
        "seconds": round(latency["seconds"], 2),
        "peak_rss_mb": round(latency["peak_rss_mb"], 1),
    }
    document = {"results": rows, "latency_50ms": latency_row, "targets": TARGETS}
    if CODE != OWN:
        document["code"] = CODE
    out = Path(args.results)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"written to {out}")
    print_table(rows, latency_row)


def print_table(rows: list[dict[str, Any]], latency: dict[str, Any]) -> None:
    print(
        f"\n{'scenario':>9} {'N':>6} {'tags/s':>7} {'ceiling/s':>9} {'vs ceil':>7} "
        f"{'skopeo/s':>8} {'x skopeo':>8} {'ceil/skopeo':>11} "
        f"{'seconds':>8} {'RSS MB':>7}  CPU s (poller/moto/registry), per tag µs, DynamoDB calls"
    )
    for r in rows:
        steady = r["scenario"] == "steady"
        cpu = "/".join(f"{r['cpu_s'].get(k, 0):.1f}" for k in ("poller", "moto", "registry"))
        cpu += (
            " (" + "/".join(f"{r['cpu_us_per_tag'].get(k, 0)}" for k in ("poller", "moto", "registry")) + ")"
        )
        print(
            f"{r['scenario']:>9} {r['n']:>6} {r['tags_per_s']:>7.0f} "
            + (
                f"{r['ceiling_per_s']:>9.0f} {r['ceiling_ratio']:>7.2f} "
                f"{r['skopeo_per_s']:>8.1f} {r['skopeo_ratio']:>7.0f}x {r['ceiling_skopeo_ratio']:>10.0f}x "
                if steady
                else f"{'':>9} {'':>7} {'':>8} {'':>8} {'':>11} "
            )
            + f"{r['seconds']:>8.2f} {r['peak_rss_mb']:>7.1f}  {cpu}, {sum(r['dynamodb_calls'].values())}"
        )
    print(
        f"\n50 ms per request, N=1000, {CONCURRENCY} per registry: {latency['tags_per_s']:.0f} tags/s "
        f"(bound {latency['bound_per_s']:.0f}/s), {latency['seconds']:.2f}s, {latency['peak_rss_mb']:.1f} MB"
    )


if __name__ == "__main__":
    main()
