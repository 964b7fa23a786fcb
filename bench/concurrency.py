"""Concurrency bench: N tags pushed at once through the whole local stack (registry notifications,
the webhook, the SQS loops, the consumer), with 1 container per function (every invocation
serialised) and with several (as Lambda scales out). Prints push -> patch latency per tag (p50,
p90, max), the consumer's invocations, cold starts and peak concurrency, and the patches per
workload (exactly one each, whatever the concurrency).

    python -m bench.concurrency --tags 50 --containers 1,3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "concurrency.json"


def measure(tags: int, containers: int) -> dict[str, Any]:
    from tagpin_local.kube.manifests import deployment
    from tagpin_local.oci import push_image
    from tagpin_local.stack import LocalStack, StackOptions

    with LocalStack(StackOptions(notifications=True, consume=True, containers=containers)) as st:
        assert st.registry is not None
        document = st.config_document()
        document["images"] = []
        for n in range(tags):
            image = f"{st.registry.host}/storm/app{n}:stable"
            push_image(st.registry.url, f"storm/app{n}", "stable")
            st.kube.create(deployment(f"app{n}", "default", image, container="app"))
            target = {"cluster": "local", "namespace": "default", "name": f"app{n}", "container": "app"}
            document["images"].append({"image": image, "targets": [target]})
        st.write_config(document)
        before = st.functions["consumer"].invocations
        pushed: dict[int, tuple[str, float]] = {}

        def push(n: int) -> None:
            digest = push_image(st.registry.url, f"storm/app{n}", "stable")  # type: ignore[union-attr]
            pushed[n] = (digest, time.monotonic())

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(push, range(tags)))
        patched: dict[int, float] = {}
        deadline = time.monotonic() + 120
        while len(patched) < tags and time.monotonic() < deadline:
            for n in range(tags):
                if n in patched or n not in pushed:
                    continue
                spec = st.kube.get("Deployment", "default", f"app{n}")["spec"]["template"]["spec"]
                if spec["containers"][0]["image"].endswith("@" + pushed[n][0]):
                    patched[n] = time.monotonic()
            time.sleep(0.05)
        latencies = sorted(patched[n] - pushed[n][1] for n in patched)
        consumer = st.functions["consumer"]
        first = min(t for _, t in pushed.values())
        last = max(patched.values(), default=first)
        busy = {  # where the time went: each function's invocations during the storm
            name: {
                "invocations": len(calls),
                "busy_s": round(sum(i.finished - i.started for i in calls), 2),
                "waited_for_a_container_s": round(sum(i.started - i.requested for i in calls), 2),
                "utilisation": round(
                    sum(i.finished - i.started for i in calls) / (containers * (last - first)), 2
                )
                if last > first
                else None,
            }
            for name in ("webhook", "consumer")
            for calls in [
                [i for i in st.functions[name].history if i.started >= first - 1 and i.started <= last]
            ]
        }
        patches = [st.kube.count("PATCH", rf"/deployments/app{n}$") for n in range(tags)]
        return {
            "tags": tags,
            "containers": containers,
            "patched": len(patched),
            "p50_s": round(statistics.median(latencies), 2) if latencies else None,
            "p90_s": round(latencies[int(0.9 * (len(latencies) - 1))], 2) if latencies else None,
            "p99_s": round(latencies[int(0.99 * (len(latencies) - 1))], 2) if latencies else None,
            "max_s": round(latencies[-1], 2) if latencies else None,
            "consumer_invocations": consumer.invocations - before,
            "consumer_cold_starts": consumer.cold_starts,
            "consumer_peak_concurrency": consumer.peak_concurrency,
            "patches_per_workload": sorted(set(patches)),
            "functions": busy,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tags", type=int, default=50)
    parser.add_argument("--containers", default="1,3")
    args = parser.parse_args()
    rows = []
    for c in (int(x) for x in args.containers.split(",")):
        row = measure(args.tags, c)
        rows.append(row)
        print(
            f"{row['tags']} tags pushed at once, {c} container(s) per function: push -> patch "
            f"p50 {row['p50_s']} s, p90 {row['p90_s']} s, p99 {row['p99_s']} s, max {row['max_s']} s; "
            f"{row['patched']} patched; "
            f"consumer: {row['consumer_invocations']} invocations, {row['consumer_cold_starts']} "
            f"container(s), peak {row['consumer_peak_concurrency']} at once; "
            f"patches per workload {row['patches_per_workload']}"
        )
        for name, b in row["functions"].items():
            print(
                f"  {name}: {b['invocations']} invocations, busy {b['busy_s']} s (utilisation "
                f"{b['utilisation']} of {c} container(s)), waited for a container "
                f"{b['waited_for_a_container_s']} s"
            )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
