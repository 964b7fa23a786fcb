"""The poll bench's setup and peers (``bench/poll.py``): the registry's tags, the state table in each
scenario's layout, the registry's ceiling (wrk) and a skopeo loop, and stopping the moto server.

The state is written as the poller and the consumer leave it, through the same adapter for the
settled digests (``Digests.settle_many``), so that a change of the state layout changes the bench's
setup with it: the steady scenario is checked after each run (no write but an older library's
cursor, one read of the settled digests), never assumed.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import httpx

TAGS_PER_REPO = 100
CONCURRENCY = 32
OLD = "sha256:" + "0" * 64  # the digest every tag had before it moved (the "moved" scenario)
SINCE = 1000  # when the state says each tag last moved (ms)


def images(host: str, n: int) -> list[str]:
    return [f"{host}/bench/r{i // TAGS_PER_REPO:03d}:t{i % TAGS_PER_REPO:03d}" for i in range(n)]


def paths(n: int) -> list[str]:
    return [f"/v2/bench/r{i // TAGS_PER_REPO:03d}/manifests/t{i % TAGS_PER_REPO:03d}" for i in range(n)]


def target_id(image: str) -> str:
    repo, tag = image.rsplit("/", 1)[-1].split(":")
    return f"bench/default/Deployment/{repo}-{tag}/app"


def populate_registry(url: str, n: int) -> str:
    """``n`` tags over n/100 repositories, all one manifest; returns its digest."""
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


def create_table(db: Any, table: str) -> None:
    db.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in ("pk", "sk")],
        BillingMode="PAY_PER_REQUEST",
    )


def populate_state(
    endpoint: str, table: str, host: str, n: int, digest: str, *, settled: bool, start: int = 0
) -> None:
    """A state table as a poll and the consumer leave it: every tag at ``digest`` since ``SINCE``,
    its one target applied at it; with ``settled``, the tags in the settled digests too (as every
    poll after the first leaves them). Without: the tags' and targets' items only (a store written
    before the settled digests existed, or whose poll has not finished yet). ``start``: the table
    exists with the first ``start`` tags; add the others (the steady table grows with N, so that a
    poll of N tags reads the settled digests of N tags, as an install of N tags has)."""
    from tagpin.adapters.dynamodb import dynamodb_state

    db = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    if start == 0:
        create_table(db, table)
    names = images(host, n)[start:]
    items: list[dict[str, Any]] = []
    t = {"N": str(SINCE)}
    for image in names:
        items.append(
            {
                "pk": {"S": "TAG#" + image},
                "sk": {"S": "STATE"},
                "digest": {"S": digest},
                "observed_at": t,
                "changed_at": t,
                "resolved_at": t,
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
        request = {table: [{"PutRequest": {"Item": item}} for item in batch]}
        while request:
            request = db.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, [items[i : i + 25] for i in range(0, len(items), 25)]))
    if settled:
        from tagpin.domain.shards import shard

        digests = dynamodb_state(db, table).digests
        groups: dict[str, list[tuple[str, str, int]]] = {}
        for image in names:
            groups.setdefault(shard(image), []).append((image, digest, SINCE))
        with ThreadPoolExecutor(8) as pool:
            written = sum(pool.map(digests.settle_many, groups.values()))
        assert written == len(names), (written, len(names))


def ceiling(url: str, n: int, seconds: int = 5) -> float:
    """GETs of the same ``n`` manifests with wrk (32 connections): what the registry serves."""
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
    """``skopeo inspect --raw`` per tag, one after the other, on a sample of the tags."""
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


def stop(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Stop a server process: SIGTERM, then SIGKILL after ``grace`` seconds. moto_server exits
    through ``sys.exit`` in its SIGTERM handler, and tearing down an interpreter holding tens of
    thousands of items can take longer than that on a busy machine (the bench used to crash
    here, after its measurements, with ``TimeoutExpired``)."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
