"""Frozen and slow registries beside a healthy one: how long each poll run takes, run after run, and
what each registry's tags get.

The real registry (Debian's docker-registry) serves ``--healthy`` tags. Scenarios, each with its own
``Poller`` over one ``RegistryClient`` built with the client's defaults, as ``wiring`` builds it
(10 s request timeout, 3 tries, a breaker of 5 failures and 60 s cooldown, 64 requests in flight
of which 32 per registry, the registries' 5 s deadline), run ``--runs`` times back to back, with the
state table in moto (in process):

- ``frozen``: a ``HangingServer`` on 127.0.0.1 (it accepts every connection and never answers)
  followed for ``--hanging`` tags (each of the given numbers is a scenario);
- ``frozen-fill``: two such servers with ``--fill`` tags each, enough to take every global slot,
  asked before the healthy registry (its tags sort last: it is followed as ``localhost``);
- ``slow``: ``--healthy`` more tags through a proxy in front of the real registry that answers every
  request after ``--slow`` seconds (past the registries' deadline, within the request timeout).

Before each run one healthy tag is pushed again: each run must find it changed.

Per run: wall time, tags resolved, changed, errors, the healthy tags changed, and the error recorded
on the last frozen or slow tag. The load average is recorded before and after (the machine may be
shared).

Usage:  .venv/bin/python bench/hanging_registry.py [--healthy 20] [--hanging 1 10] [--fill 40]
        [--slow 6] [--runs 4] [--out bench/results/hanging_registry.json] [--code LABEL]
Writes the results and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "hanging_registry.json"
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "common"), str(ROOT / "tools")]


def followed(host: str, prefix: str, n: int) -> list[Any]:
    from tagpin.domain.channels import FollowedKey
    from tagpin.domain.config import FollowedImage, Target

    return [
        FollowedImage(
            image=FollowedKey(f"{host}/bench/{prefix}{i}:stable"),
            targets=[Target(cluster="c", name=f"{prefix}{i}", container="app")],
        )
        for i in range(n)
    ]


@contextlib.contextmanager
def problem(kind: str, registry_url: str, args: argparse.Namespace, size: int) -> Iterator[list[Any]]:
    """The followed images of the scenario's frozen or slow registries, while they run."""
    from tagpin_local.faultproxy import FaultProxy, HangingServer

    with contextlib.ExitStack() as stack:
        if kind == "frozen":
            server = stack.enter_context(HangingServer())
            yield followed(server.host, "frozen", size)
        elif kind == "frozen-fill":
            servers = [stack.enter_context(HangingServer()) for _ in range(2)]
            yield [f for n, s in enumerate(servers) for f in followed(s.host, f"frozen{n}-", size)]
        else:
            proxy = stack.enter_context(FaultProxy(registry_url, latency=args.slow))
            yield followed(proxy.host, "slow", size)


def scenario(
    kind: str, size: int, registry_url: str, registry_port: int, args: argparse.Namespace
) -> list[dict[str, Any]]:
    import boto3
    from moto import mock_aws
    from tagpin.adapters.dynamodb import dynamodb_state
    from tagpin.adapters.registry.client import RegistryClient
    from tagpin.domain.config import Registry
    from tagpin.ports.registry import RegistryAccess
    from tagpin.usecases.detect import Detector
    from tagpin.usecases.poll import Poller
    from tagpin_local.oci import push_image

    from tests.support.aws import create_table
    from tests.support.queues import ListQueue

    host = f"localhost:{registry_port}" if kind == "frozen-fill" else f"127.0.0.1:{registry_port}"
    healthy = followed(host, "ok", args.healthy)
    rows = []
    with problem(kind, registry_url, args, size) as others, mock_aws():
        db = boto3.client("dynamodb", region_name="eu-west-1")
        create_table(db, "state", ("pk", "sk"))
        state = dynamodb_state(db, "state")
        items = healthy + others
        with RegistryClient(access=lambda _h: RegistryAccess(insecure=True)) as client:
            poller = Poller(
                Detector(client, state, ListQueue()), client, state, lambda _h: Registry(insecure=True)
            )
            for run in range(1, args.runs + 1):
                push_image(registry_url, "bench/ok0", "stable")  # a change each run must find
                started = time.monotonic()
                summary = poller.run(items)
                seconds = time.monotonic() - started
                recorded = state.tags.get(others[-1].image)
                error = (recorded.last_error or "") if recorded else ""
                changed = {r.image for r in summary.results if r.outcome == "changed"}
                row = {
                    "scenario": kind,
                    "problem_tags": size,
                    "run": run,
                    "seconds": round(seconds, 2),
                    "resolved": summary.resolved,
                    "changed": summary.changed,
                    "errors": summary.errors,
                    "healthy_changed": len(changed & {f.image for f in healthy}),
                    "recorded_error": error,
                }
                rows.append(row)
                print(
                    f"{kind:11s} {size:3d} run {run}: {seconds:6.2f} s  resolved {summary.resolved:3d}  "
                    f"changed {summary.changed:3d} (healthy {row['healthy_changed']:2d})  "
                    f"errors {summary.errors:3d}  {error[:100]}",
                    flush=True,
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--healthy", type=int, default=20)
    parser.add_argument("--hanging", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--fill", type=int, default=40, help="tags on each of two frozen registries")
    parser.add_argument("--slow", type=float, default=6.0, help="seconds the slow registry takes")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--code", help="what code ran (default: git describe)")
    args = parser.parse_args()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ[name] = "bench"
    os.environ.pop("AWS_ENDPOINT_URL", None)

    from tagpin_local.oci import push_image
    from tagpin_local.registry_server import RegistryServer

    load_before = [round(x, 2) for x in os.getloadavg()]
    rows: list[dict[str, Any]] = []
    with RegistryServer() as registry:
        for i in range(args.healthy):
            push_image(registry.url, f"bench/ok{i}", "stable")
            push_image(registry.url, f"bench/slow{i}", "stable")
        for hanging in args.hanging:
            rows += scenario("frozen", hanging, registry.url, registry.port, args)
        rows += scenario("frozen-fill", args.fill, registry.url, registry.port, args)
        rows += scenario("slow", args.healthy, registry.url, registry.port, args)
    code = (
        args.code
        or subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    )
    document = {
        "code": code,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_before": load_before,  # 1, 5 and 15 minutes
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "slow_seconds": args.slow,
        "runs": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.out}; load average before {load_before}, after {document['load_average_after']}")


if __name__ == "__main__":
    main()
