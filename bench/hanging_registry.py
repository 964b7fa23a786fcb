"""A frozen registry beside a healthy one: how long each poll run takes, run after run.

The real registry (Debian's docker-registry) serves ``--healthy`` tags; a ``HangingServer`` on
127.0.0.1 (it accepts every connection and never answers) is followed for ``--hanging`` tags. One
``Poller`` over one ``RegistryClient`` built with the client's defaults, as ``wiring`` builds it
(10 s request timeout, 3 tries, a breaker of 5 failures and 60 s cooldown, and the per-registry
deadline), runs ``--runs`` times back to back, with the state table in moto (in process). Before
each run one healthy tag is pushed again: each run must find it changed.

Per run: wall time, tags resolved, changed, errors, and the error recorded on a hanging tag.

Usage:  .venv/bin/python bench/hanging_registry.py [--healthy 20] [--hanging 1 10] [--runs 4]
Writes bench/results/hanging_registry.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "hanging_registry.json"
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "common"), str(ROOT / "tools")]


def scenario(
    registry_url: str, registry_host: str, healthy: int, hanging: int, runs: int
) -> list[dict[str, Any]]:
    import boto3
    from moto import mock_aws
    from tagpin.adapters.dynamodb import dynamodb_state
    from tagpin.adapters.registry.client import RegistryClient
    from tagpin.domain.config import FollowedImage, Registry, Target
    from tagpin.ports.registry import RegistryAccess
    from tagpin.usecases.detect import Detector
    from tagpin.usecases.poll import Poller
    from tagpin_local.faultproxy import HangingServer
    from tagpin_local.oci import push_image

    from tests.support.aws import create_table
    from tests.support.queues import ListQueue

    def followed(host: str, prefix: str, n: int) -> list[FollowedImage]:
        return [
            FollowedImage(
                image=f"{host}/bench/{prefix}{i}:stable",
                targets=[Target(cluster="c", name=f"{prefix}{i}", container="app")],
            )
            for i in range(n)
        ]

    rows = []
    with HangingServer() as frozen, mock_aws():
        db = boto3.client("dynamodb", region_name="eu-west-1")
        create_table(db, "state", ("pk", "sk"))
        state = dynamodb_state(db, "state")
        items = followed(registry_host, "ok", healthy) + followed(frozen.host, "frozen", hanging)
        with RegistryClient(access=lambda _h: RegistryAccess(insecure=True)) as client:
            poller = Poller(
                Detector(client, state, ListQueue()), client, state, lambda _h: Registry(insecure=True)
            )
            for run in range(1, runs + 1):
                push_image(registry_url, "bench/ok0", "stable")  # a change each run must find
                started = time.monotonic()
                summary = poller.run(items)
                seconds = time.monotonic() - started
                recorded = state.tags.get(items[-1].image) if hanging else None
                error = (recorded.last_error or "") if recorded else ""
                rows.append(
                    {
                        "hanging": hanging,
                        "run": run,
                        "seconds": round(seconds, 2),
                        "resolved": summary.resolved,
                        "changed": summary.changed,
                        "errors": summary.errors,
                        "recorded_error": error,
                    }
                )
                print(
                    f"hanging={hanging:3d} run {run}: {seconds:6.2f} s  resolved {summary.resolved:3d}  "
                    f"changed {summary.changed}  errors {summary.errors}  "
                    f"{error[:110]}",
                    flush=True,
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--healthy", type=int, default=20)
    parser.add_argument("--hanging", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ[name] = "bench"
    os.environ.pop("AWS_ENDPOINT_URL", None)

    from tagpin_local.oci import push_image
    from tagpin_local.registry_server import RegistryServer

    rows: list[dict[str, Any]] = []
    with RegistryServer() as registry:
        for i in range(args.healthy):
            push_image(registry.url, f"bench/ok{i}", "stable")
        for hanging in args.hanging:
            rows += scenario(registry.url, registry.host, args.healthy, hanging, args.runs)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    document = {"code": commit, "machine": platform.machine(), "cpus": os.cpu_count(), "runs": rows}
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
