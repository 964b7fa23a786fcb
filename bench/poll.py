"""Poll throughput against the real local registry, next to its ceiling and to a skopeo loop.

For N = 100, 1,000, 10,000 followed tags (one manifest pushed under many tags across N/100
repositories; state pre-populated so the run is the steady-state scheduled poll):

* tagpin: ``Poller.run`` as the handler runs it (the aiohttp registry client, state read in
  batches from a moto server in its own process, the real Detector), in a fresh interpreter per
  N so that peak RSS is that run's;
* ceiling: ``wrk`` GETs of the same N manifests (32 connections; wrk cannot do HEAD: it waits for
  the body that Content-Length announces);
* skopeo: ``skopeo inspect --raw`` per tag, sequentially, on a sample of the tags (its cost per
  tag is a process start and a fresh connection, whatever N is);
* with 50 ms injected per request (the fault proxy), N = 1,000: concurrency, not CPU, bounds it.

Usage:  .venv/bin/python bench/poll.py [--sizes 100,1000,10000] [--skopeo-sample 40]
Writes bench/results/poll.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "poll.json"
sys.path[:0] = [
    str(ROOT / "layers" / "common"),
    str(ROOT / "tools"),
    str(ROOT),
]  # tests.support: the in-memory queue

import boto3  # noqa: E402
import httpx  # noqa: E402

TABLE = "tagpin-state"
TAGS_PER_REPO = 100
CONCURRENCY = 32
LATENCY = 0.05
ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def images(host: str, n: int) -> list[str]:
    return [f"{host}/bench/r{i // TAGS_PER_REPO:03d}:t{i % TAGS_PER_REPO:03d}" for i in range(n)]


def paths(n: int) -> list[str]:
    return [f"/v2/bench/r{i // TAGS_PER_REPO:03d}/manifests/t{i % TAGS_PER_REPO:03d}" for i in range(n)]


# --- setup -------------------------------------------------------------------------------------


def populate_registry(url: str, n: int) -> str:
    from tagpin_local.oci import OCI_MANIFEST, _image_manifest, put_manifest, upload_blob

    repos = (n + TAGS_PER_REPO - 1) // TAGS_PER_REPO
    bodies: dict[int, bytes] = {}
    with httpx.Client(timeout=30) as http:
        for r in range(repos):
            layer = upload_blob(http, url, f"bench/r{r:03d}", b"tagpin bench layer")
            bodies[r] = _image_manifest(
                http, url, f"bench/r{r:03d}", layer, {"os": "linux", "architecture": "amd64"}
            )

    def put(indices: range) -> str:
        digest = ""
        with httpx.Client(timeout=30) as http:
            for i in indices:
                r, t = divmod(i, TAGS_PER_REPO)
                digest = put_manifest(
                    http, url, f"bench/r{r:03d}", f"t{t:03d}", bodies[r], media_type=OCI_MANIFEST
                )
        return digest

    step = 250
    with ThreadPoolExecutor(8) as pool:
        digests = set(pool.map(put, [range(i, min(n, i + step)) for i in range(0, n, step)]))
    assert len(digests) == 1, digests  # one manifest (same layer and config) everywhere
    return digests.pop()


def populate_state(endpoint: str, host: str, n: int, digest: str) -> None:
    db = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    db.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in ("pk", "sk")],
        BillingMode="PAY_PER_REQUEST",
    )
    items: list[dict[str, Any]] = []
    for image in images(host, n):
        t = {"N": "1000"}
        items.append(
            {
                "pk": {"S": "TAG#" + image},
                "sk": {"S": "STATE"},
                "digest": {"S": digest},
                "observed_at": t,
                "changed_at": t,
                "checked_at": t,
                "trigger": {"S": "poll"},
            }
        )
        items.append(
            {
                "pk": {"S": "TARGET#" + target_id(image)},
                "sk": {"S": "STATE"},
                "image": {"S": image},
                "digest": {"S": digest},
                "observed_at": t,
                "status": {"S": "applied"},
                "updated_at": t,
            }
        )

    def write(batch: list[dict[str, Any]]) -> None:
        request = {TABLE: [{"PutRequest": {"Item": item}} for item in batch]}
        while request:
            request = db.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, [items[i : i + 25] for i in range(0, len(items), 25)]))


def target_id(image: str) -> str:
    repo, tag = image.rsplit("/", 1)[-1].split(":")
    return f"bench/default/Deployment/{repo}-{tag}/app"


# --- measurements --------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker(args: argparse.Namespace) -> None:
    """One poll in this (fresh) process; prints {seconds, tags_per_s, peak_rss_mb, counts} and
    where the time went: CPU seconds of this process, the moto server and the registry during the
    measured poll, and each phase alone (resolution; state reads as the poller issues them)."""
    from tagpin.adapters.dynamodb import dynamodb_state
    from tagpin.adapters.registry.client import RegistryClient
    from tagpin.domain.config import FollowedImage, Registry, Target
    from tagpin.ports.registry import RegistryAccess
    from tagpin.usecases.detect import Detector
    from tagpin.usecases.poll import Poller

    from tests.support.queues import ListQueue

    db = boto3.client("dynamodb", endpoint_url=args.aws, region_name="us-east-1")
    state = dynamodb_state(db, TABLE)
    followed = []
    for image in images(args.host, args.n):
        repo, tag = image.rsplit("/", 1)[-1].split(":")
        target = Target(cluster="bench", name=f"{repo}-{tag}", container="app")
        followed.append(FollowedImage(image=image, targets=[target]))
    queue = ListQueue()
    with RegistryClient(
        access=lambda _h: RegistryAccess(insecure=True), max_concurrency=64, per_registry=CONCURRENCY
    ) as client:
        poller = Poller(Detector(client, state, queue), client, state, lambda _h: Registry(insecure=True))
        poller.run(followed[:20])  # connections and the state client warmed, as in a warm container
        pids = {"poller": os.getpid(), "moto": args.moto_pid, "registry": args.registry_pid}
        cpu_before = {k: cpu_seconds(p) for k, p in pids.items() if p}
        started = time.perf_counter()
        summary = poller.run(followed, remaining_ms=lambda: 900_000)
        seconds = time.perf_counter() - started
        cpu = {k: round(cpu_seconds(p) - cpu_before[k], 2) for k, p in pids.items() if p}
        started = time.perf_counter()
        resolved = client.resolve_many([f.ref for f in followed])
        resolve_seconds = time.perf_counter() - started
        assert len(resolved) == len(followed)
        started = time.perf_counter()
        state.tags.get_many([f.image for f in followed])
        state.targets.get_many([t.id for f in followed for t in f.targets])
        state_seconds = time.perf_counter() - started
        moto_before = cpu_seconds(args.moto_pid) if args.moto_pid else 0.0
        started = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:  # as Poller._read_state issues them
            images_ = [f.image for f in followed]
            ids = [t.id for f in followed for t in f.targets]
            futures: list[Future[Any]] = [
                pool.submit(state.tags.get_many, images_[i : i + 100]) for i in range(0, len(images_), 100)
            ]
            futures += [
                pool.submit(state.targets.get_many, ids[i : i + 100]) for i in range(0, len(ids), 100)
            ]
            for fut in futures:
                fut.result()
        state_concurrent_seconds = time.perf_counter() - started
        moto_cpu_per_call_ms = (
            (cpu_seconds(args.moto_pid) - moto_before) / len(futures) * 1000 if args.moto_pid else 0.0
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "seconds": seconds,
                "tags_per_s": args.n / seconds,
                "peak_rss_mb": peak,
                "counts": summary.counts(),
                "resolve_only_per_s": args.n / resolve_seconds,
                "state_reads_s": state_seconds,
                "state_reads_concurrent_s": state_concurrent_seconds,
                "batch_get_calls": len(futures),
                "moto_cpu_per_batch_get_ms": moto_cpu_per_call_ms,
                "cpu_s": cpu,
            }
        )
    )


def run_worker(
    n: int, registry_host: str, host: str, aws: str, moto_pid: int = 0, registry_pid: int = 0
) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            "--n",
            str(n),
            "--registry-host",
            registry_host,
            "--host",
            host,
            "--aws",
            aws,
            "--moto-pid",
            str(moto_pid),
            "--registry-pid",
            str(registry_pid),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **ENV},
        timeout=600,
    )
    if out.returncode != 0:
        raise RuntimeError(f"worker failed: {out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def ceiling(url: str, n: int, seconds: int = 5) -> float:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk is not installed (make tools installs it)")
    from tagpin.adapters.registry.client import ACCEPT

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "paths.lua"
        listing = ", ".join(f'"{p}"' for p in paths(n))
        script.write_text(
            f"local paths = {{{listing}}}\nlocal i = 0\n"
            f'wrk.headers["Accept"] = "{ACCEPT}"\n'
            'request = function()\n  i = i % #paths + 1\n  return wrk.format("GET", paths[i])\nend\n'
        )
        out = subprocess.run(
            [wrk, "-t2", f"-c{CONCURRENCY}", f"-d{seconds}s", "-s", str(script), url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    line = next(line for line in out.splitlines() if line.startswith("Requests/sec:"))
    return float(line.split()[1])


def skopeo_rate(host: str, n: int, sample: int) -> float:
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        raise SystemExit("skopeo is not installed (make tools installs it)")
    chosen = images(host, n)[:: max(1, n // sample)][:sample]
    started = time.perf_counter()
    for image in chosen:
        subprocess.run(
            [skopeo, "inspect", "--tls-verify=false", "--raw", f"docker://{image}"],
            capture_output=True,
            check=True,
            timeout=60,
        )
    return len(chosen) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--skopeo-sample", type=int, default=40)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--registry-host", default="")
    parser.add_argument("--host", default="")
    parser.add_argument("--aws", default="")
    parser.add_argument("--moto-pid", type=int, default=0)
    parser.add_argument("--registry-pid", type=int, default=0)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    from tagpin_local.faultproxy import FaultProxy
    from tagpin_local.registry_server import RegistryServer, free_port

    sizes = [int(s) for s in args.sizes.split(",")]
    port = free_port()
    moto = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **ENV},
    )
    aws = f"http://127.0.0.1:{port}"
    rows: list[dict[str, Any]] = []
    breakdowns: list[dict[str, Any]] = []
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
            started = time.perf_counter()
            pushed = max(*sizes, 1000)  # the latency run polls 1,000
            digest = populate_registry(registry.url, pushed)
            print(f"pushed {pushed} tags in {time.perf_counter() - started:.1f}s", flush=True)
            os.environ.update(ENV)
            populate_state(aws, registry.host, pushed, digest)
            with FaultProxy(registry.url, latency=LATENCY) as proxy:
                populate_state_alias(aws, registry.host, proxy.host, 1000, digest)
                for n in sizes:
                    result = run_worker(n, registry.host, registry.host, aws, moto.pid, registry.pid or 0)
                    assert result["counts"]["unchanged"] == n, result
                    row = {
                        "n": n,
                        "tags_per_s": round(result["tags_per_s"], 1),
                        "ceiling_per_s": round(ceiling(registry.url, n), 1),
                        "skopeo_per_s": round(skopeo_rate(registry.host, n, min(n, args.skopeo_sample)), 2),
                        "seconds": round(result["seconds"], 2),
                        "peak_rss_mb": round(result["peak_rss_mb"], 1),
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    breakdown = {
                        "n": n,
                        "poll_cpu_s": result["cpu_s"],
                        "resolve_only_per_s": round(result["resolve_only_per_s"], 1),
                        "state_reads_sequential_s": round(result["state_reads_s"], 2),
                        "state_reads_concurrent_s": round(result["state_reads_concurrent_s"], 2),
                        "batch_get_calls": result["batch_get_calls"],
                        "moto_cpu_per_batch_get_ms": round(result["moto_cpu_per_batch_get_ms"], 1),
                    }
                    breakdowns.append(breakdown)
                    print(f"  where the time went: {json.dumps(breakdown)}", flush=True)
                latency = run_worker(1000, registry.host, proxy.host, aws)
                assert latency["counts"]["unchanged"] == 1000, latency
    finally:
        moto.terminate()
        moto.wait(timeout=10)
    latency_row = {
        "n": 1000,
        "injected_latency_ms": LATENCY * 1000,
        "per_registry_concurrency": CONCURRENCY,
        "tags_per_s": round(latency["tags_per_s"], 1),
        "bound_per_s": round(CONCURRENCY / LATENCY, 1),
        "seconds": round(latency["seconds"], 2),
        "peak_rss_mb": round(latency["peak_rss_mb"], 1),
    }
    doc = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "results": rows,
        "latency_50ms": latency_row,
        "breakdown": breakdowns,
        "targets": {"ceiling_ratio": 0.7, "skopeo_ratio": 20, "seconds_10000": 60, "peak_rss_mb": 256},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    print()
    print(
        f"{'N':>6} {'tagpin/s':>9} {'ceiling/s':>9} {'skopeo/s':>8} {'vs ceil':>7} {'vs skopeo':>9} "
        f"{'seconds':>8} {'RSS MB':>7}"
    )
    for r in rows:
        print(
            f"{r['n']:>6} {r['tags_per_s']:>9.0f} {r['ceiling_per_s']:>9.0f} {r['skopeo_per_s']:>8.1f} "
            f"{r['tags_per_s'] / r['ceiling_per_s']:>7.0%} {r['tags_per_s'] / r['skopeo_per_s']:>8.0f}x "
            f"{r['seconds']:>8.2f} {r['peak_rss_mb']:>7.1f}"
        )
    print(
        f"\n50 ms per request, N=1000, {CONCURRENCY} per registry: {latency_row['tags_per_s']:.0f} tags/s "
        f"(bound {latency_row['bound_per_s']:.0f}/s), {latency_row['seconds']:.2f}s, "
        f"{latency_row['peak_rss_mb']:.1f} MB"
    )
    print(f"written to {RESULTS.relative_to(ROOT)}")


def populate_state_alias(endpoint: str, registry_host: str, alias: str, n: int, digest: str) -> None:
    """State for the same tags seen through the proxy's host name (the latency run)."""
    db = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    items: list[dict[str, Any]] = []
    for image in images(alias, n):
        t = {"N": "1000"}
        items.append(
            {
                "pk": {"S": "TAG#" + image},
                "sk": {"S": "STATE"},
                "digest": {"S": digest},
                "observed_at": t,
                "changed_at": t,
                "checked_at": t,
            }
        )
    for start in range(0, len(items), 25):
        db.batch_write_item(
            RequestItems={TABLE: [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]}
        )


if __name__ == "__main__":
    main()
