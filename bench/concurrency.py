"""Concurrency bench: N tags pushed at once through the whole local stack (registry notifications,
the webhook, the SQS loops, the consumer), in three setups measured in one run:

* ``threads:1``: one container per function (and the webhook one more per batch of its checks at
  once, its event source's concurrency), every container a thread of the stack's process;
* ``threads:3``: three containers per function, threads of the stack's process (one interpreter
  and its GIL for moto, the clusters' fronts, the loops and every container);
* ``processes:3``: three containers per function, each a process of its own as on Lambda
  (``StackOptions.processes``, ``tagpin_local.lambda_process``), and moto's server too;
* ``processes:3:moto-first``: the same, moto's process at a higher scheduling priority than the
  rest (``StackOptions.moto_priority``, where the user may raise it; the row records the priority
  moto ran at): on AWS, DynamoDB does not share the functions' cores, and here the one lock of
  DynamoDB's requests waited behind the busy cores (``moto_process.serialize_dynamodb``). Both
  rows are measured, so the figure before the priority stays comparable.

Each push is timed from the moment the registry has the new manifest to the moment the Deployment
carries its digest, as a watch of the namespace's Deployments delivers it (the API server sends
each write as it stores it; reading 50 Deployments in a loop would cost the stack's process more
than it measures). Prints push -> patch latency per tag (p50, p90, p99, max), the consumer's
invocations, containers and peak concurrency, the patches per workload (exactly one each, whatever
the concurrency), each function's busy time per invocation, where each push's time goes (the
registry's notification, the webhook, the queue and the receive loops, the consumer: from the calls
the event sources make, ``where_the_time_goes``) and where the CPU went during the storm (this
process, the function containers, the API server, etcd, the registry...).

    python -m bench.concurrency --tags 50 --setups threads:1,threads:3,processes:3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.stages import Calls, is_sqs, notification_line, where_the_time_goes

RESULTS = Path(__file__).parent / "results" / "concurrency.json"
SETUPS = "threads:1,threads:3,processes:3,processes:3:moto-first"
MOTO_FIRST = "moto-first"  # a setup's third part: moto's process at ``moto_process.PRIORITY``


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """Every descendant of this process and itself: pid -> (command name, CPU seconds so far)."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[str, float, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        name, fields = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()
        found[int(entry.name)] = (name, (int(fields[11]) + int(fields[12])) / tick, int(fields[1]))
    ours, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, (_n, _c, parent) in found.items() if parent in ours} - ours
        ours |= more
        grew = bool(more)
    return {pid: (found[pid][0], found[pid][1]) for pid in ours}


def cpu_during(before: dict[int, tuple[str, float]], roles: dict[int, str]) -> dict[str, float]:
    """CPU seconds each role (a function's containers, this process, a program) used since ``before``."""
    spent: dict[str, float] = {}
    for pid, (name, cpu) in cpu_by_process().items():
        role = "stack process" if pid == os.getpid() else roles.get(pid, name)
        spent[role] = spent.get(role, 0.0) + cpu - before.get(pid, (name, 0.0))[1]
    ranked = sorted(spent.items(), key=lambda kv: -kv[1])
    return {role: round(seconds, 2) for role, seconds in ranked if seconds >= 0.01}


def watch_patches(
    st: Any, names: set[str], seen: dict[str, tuple[str, float]], since: str
) -> threading.Thread:
    """A thread that records, for each Deployment of ``names``, the first image pinned to a digest
    (``repo:tag@sha256:...``: only tagpin's patch makes one) and when the watch delivered it."""
    from kubernetes import client, watch

    api = client.AppsV1Api(st.kube.kube.api_client())

    def run() -> None:
        watcher = watch.Watch()  # type: ignore[no-untyped-call]
        events = watcher.stream(  # type: ignore[no-untyped-call]
            api.list_namespaced_deployment,
            "default",
            resource_version=since,
            timeout_seconds=120,
            deserialize=False,
        )
        for event in events:
            at = time.monotonic()
            obj = event["object"]
            name = obj["metadata"]["name"]
            image = obj["spec"]["template"]["spec"]["containers"][0]["image"]
            if name in names and name not in seen and "@" in image:
                seen[name] = (image, at)
                if len(seen) == len(names):
                    watcher.stop()  # type: ignore[no-untyped-call]

    thread = threading.Thread(target=run, name="bench-watch", daemon=True)
    thread.start()
    return thread


def registry_retries(log_path: Path | None, offset: int) -> int:
    """The notifications the registry had to send again (a webhook answer not in time, or not a
    2xx): distribution logs each one (``retryingsink: error writing events``)."""
    if log_path is None or not log_path.exists():
        return 0
    with log_path.open("rb") as log:
        log.seek(offset)
        return sum(1 for line in log if b"retryingsink" in line)


def quiet(webhook: Any, seconds: float = 1.0, limit: float = 60.0) -> None:
    """Wait until the setup's own pushes are delivered: no webhook invocation for ``seconds``."""
    deadline = time.monotonic() + limit
    count = -1
    while count != webhook.invocations and time.monotonic() < deadline:
        count = webhook.invocations
        time.sleep(seconds)


def moto_requests(
    before: dict[str, tuple[int, float, float]], after: dict[str, tuple[int, float, float]]
) -> dict[str, dict[str, float]]:
    """The requests moto's server answered during the storm, per operation (most first): how many,
    and the wall and CPU seconds its threads spent on them (empty: moto in the stack's process)."""
    spent = {
        name: (
            n - before.get(name, (0, 0.0, 0.0))[0],
            wall - before.get(name, (0, 0.0, 0.0))[1],
            cpu - before.get(name, (0, 0.0, 0.0))[2],
        )
        for name, (n, wall, cpu) in after.items()
    }
    ranked = sorted(((k, v) for k, v in spent.items() if v[0] > 0), key=lambda kv: -kv[1][0])
    return {k: {"requests": n, "wall_s": round(w, 2), "cpu_s": round(c, 2)} for k, (n, w, c) in ranked}


def push_from_outside(url: str, tags: int) -> dict[str, Any]:
    """The N pushes, 16 at a time, from a process of their own (pushes come from outside the stack:
    in the stack's process they would take its CPU): when the first started and, per workload, the
    digest pushed and when its push returned (``time.monotonic``, one clock for every process)."""
    command = [sys.executable, "-m", "bench.concurrency", "--push", url, "--tags", str(tags)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def push_all(url: str, tags: int) -> None:
    from tagpin_local.oci import push_image

    pushed: dict[str, tuple[str, float]] = {}

    def push(n: int) -> None:
        digest = push_image(url, f"storm/app{n}", "stable")
        pushed[f"app{n}"] = (digest, time.monotonic())

    first = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(push, range(tags)))
    print(json.dumps({"first": first, "pushed": pushed}))


def measure(tags: int, containers: int, processes: bool, moto_first: bool = False) -> dict[str, Any]:
    from kubernetes import client
    from tagpin_local.kube.manifests import deployment
    from tagpin_local.lambda_process import ProcessFunction
    from tagpin_local.lambda_runtime import LocalFunction
    from tagpin_local.moto_process import PRIORITY
    from tagpin_local.moto_server import requests_by_operation
    from tagpin_local.oci import push_image
    from tagpin_local.stack import LocalStack, StackOptions

    # moto's process above the rest (moto_first): on AWS, DynamoDB does not share the functions' cores
    options = StackOptions(
        notifications=True,
        consume=True,
        containers=containers,
        processes=processes,
        moto_priority=PRIORITY if moto_first else 0,
    )
    with LocalStack(options) as st:
        assert st.registry is not None
        document = st.config_document()
        document["images"] = []
        for n in range(tags):
            image = f"{st.registry.host}/storm/app{n}:stable"
            push_image(st.registry.url, f"storm/app{n}", "stable")
            st.kube.create(deployment(f"app{n}", "default", image, container="app"))
            target = {"cluster": "local", "namespace": "default", "name": f"app{n}", "container": "app"}
            document["images"].append({"image": image, "targets": [target]})
        st.write_config(document)  # process containers reset and warm again; threads share one root:
        for function in st.functions.values():
            if isinstance(function, LocalFunction):
                function.warm()  # warm again, once for all of a function's containers
        quiet(st.functions["webhook"])
        roles = {
            pid: f"{name} containers"
            for name, f in st.functions.items()
            if isinstance(f, ProcessFunction)
            for pid in f.pids
        }
        moto = getattr(st._moto, "_process", None)  # moto's server, when a process of its own
        moto_nice = None  # the priority moto's process runs at (None: moto in the stack's process)
        if moto is not None:
            roles[moto.pid] = "moto server"
            moto_nice = os.getpriority(os.PRIO_PROCESS, moto.pid)
        before = st.functions["consumer"].invocations
        listed = client.AppsV1Api(st.kube.kube.api_client()).list_namespaced_deployment("default", limit=1)
        since = str(listed.metadata.resource_version)  # type: ignore[union-attr]
        seen: dict[str, tuple[str, float]] = {}  # name -> (the first pinned image, when it was seen)
        names = {f"app{n}" for n in range(tags)}
        watcher = watch_patches(st, names, seen, since)
        webhook_calls = Calls(st.functions["webhook"], only=lambda event: not is_sqs(event))
        check_calls = Calls(st.functions["webhook"], only=is_sqs)
        consumer_calls = Calls(st.functions["consumer"])
        log_offset = st.registry.log_path.stat().st_size if st.registry.log_path else 0
        requests_before = requests_by_operation(st.aws_endpoint)
        cpu_before = cpu_by_process()
        pushes = push_from_outside(st.registry.url, tags)
        first = pushes["first"]
        pushed: dict[str, tuple[str, float]] = {k: (d, t) for k, (d, t) in pushes["pushed"].items()}
        watcher.join(timeout=120)
        cpu = cpu_during(cpu_before, roles)
        requests = moto_requests(requests_before, requests_by_operation(st.aws_endpoint))
        patched = {name: at for name, (image, at) in seen.items() if image.endswith("@" + pushed[name][0])}
        latencies = sorted(patched[name] - pushed[name][1] for name in patched)
        consumer = st.functions["consumer"]
        last = max(patched.values(), default=first)
        # where the time went: each function's invocations during the storm, the webhook's HTTP calls
        # and its checks apart (each with containers of their own: its HTTP ``containers``, and its
        # event source's concurrency, as many as the checks' batches at once)
        parts = {
            "webhook HTTP calls": ("webhook", "http", containers),
            "webhook checks": ("webhook", "sqs", st.sources["notifications"].concurrency),
            "consumer": ("consumer", "sqs", st.functions["consumer"].containers),
        }
        busy = {
            part: {
                "invocations": len(calls),
                "busy_s": round(sum(i.finished - i.started for i in calls), 2),
                "per_invocation_s": round(statistics.mean(i.finished - i.started for i in calls), 3)
                if calls
                else None,
                # the handler's own time (a process container measures it): the rest is the dispatch
                "handler_s": round(statistics.mean(i.handler_s for i in calls if i.handler_s is not None), 3)
                if any(i.handler_s is not None for i in calls)
                else None,
                "waited_for_a_container_s": round(sum(i.started - i.requested for i in calls), 2),
                "containers": slots,
                "utilisation": round(sum(i.finished - i.started for i in calls) / (slots * (last - first)), 2)
                if last > first
                else None,
            }
            for part, (name, kind, slots) in parts.items()
            for calls in [
                [
                    i
                    for i in st.functions[name].history
                    if i.trigger == kind and i.started >= first - 1 and i.started <= last
                ]
            ]
        }
        # Each workload's PATCHes as the API server answered them: applied (2xx) is what "rolled
        # once" means; a 409 (the resourceVersion moved: the controller wrote its status between
        # tagpin's read and its patch) is re-read and sent again, and changes nothing.
        answers = [
            [
                r.status
                for r in st.kube.requests
                if r.method == "PATCH" and r.path.endswith(f"/deployments/app{n}")
            ]
            for n in range(tags)
        ]
        patches = [sum(1 for a in got if a is not None and 200 <= a < 300) for got in answers]
        conflicts = sum(1 for got in answers for a in got if a == 409)

        def at(q: float) -> float | None:
            return round(latencies[int(q * (len(latencies) - 1))], 2) if latencies else None

        return {
            "tags": tags,
            "containers": containers,
            "isolation": "processes" if processes else "threads",
            "moto_nice": moto_nice,
            "patched": len(patched),
            "storm_s": round(last - first, 2),
            # the pushes themselves: the first started -> the last returned
            "pushes_s": round(max((t for _d, t in pushed.values()), default=first) - first, 2),
            "p50_s": round(statistics.median(latencies), 2) if latencies else None,
            "p90_s": at(0.9),
            "p99_s": at(0.99),
            "max_s": round(latencies[-1], 2) if latencies else None,
            "consumer_invocations": consumer.invocations - before,
            "consumer_cold_starts": consumer.cold_starts,
            "consumer_peak_concurrency": consumer.peak_concurrency,
            "patches_per_workload": sorted(set(patches)),  # applied
            "patch_conflicts": conflicts,
            "functions": busy,
            "where_s": where_the_time_goes(pushed, patched, webhook_calls, check_calls, consumer_calls),
            "notifications": {
                **notification_line(webhook_calls, first),
                "registry_retries": registry_retries(st.registry.log_path, log_offset),
            },
            "cpu_s": cpu,
            "moto_requests": requests,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tags", type=int, default=50)
    parser.add_argument("--setups", default=SETUPS, help="isolation:containers, comma separated")
    parser.add_argument("--push", metavar="REGISTRY_URL", help="(internal) push the N tags and report")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go (JSON)")
    args = parser.parse_args()
    if args.push:
        push_all(args.push, args.tags)
        return
    rows = []
    for setup in args.setups.split(","):
        isolation, containers, *how = setup.split(":")
        c = int(containers)
        row = measure(args.tags, c, processes=isolation == "processes", moto_first=how == [MOTO_FIRST])
        rows.append(row)
        print(
            f"{row['tags']} tags pushed at once, {c} container(s) per function as {isolation}"
            f"{'' if row['moto_nice'] is None else f' (moto at nice {row["moto_nice"]})'}: push -> "
            f"patch p50 {row['p50_s']} s, p90 {row['p90_s']} s, p99 {row['p99_s']} s, max {row['max_s']} s; "
            f"{row['patched']} patched in {row['storm_s']} s (the pushes took {row['pushes_s']} s); "
            f"consumer: {row['consumer_invocations']} invocations, {row['consumer_cold_starts']} "
            f"container(s), peak {row['consumer_peak_concurrency']} at once; "
            f"patches applied per workload {row['patches_per_workload']} "
            f"({row['patch_conflicts']} answered 409 and sent again)"
        )
        for name, b in row["functions"].items():
            print(
                f"  {name}: {b['invocations']} invocations, {b['per_invocation_s']} s each, busy "
                f"{b['busy_s']} s (utilisation {b['utilisation']} of {b['containers']} container(s)), "
                f"waited for a container {b['waited_for_a_container_s']} s; "
                f"its handler {b['handler_s']} s each (the rest: the dispatch)"
            )
        print(
            "  where a push's time goes (median / p90 / max, s): "
            + ", ".join(
                f"{k} {v['median_s']} / {v['p90_s']} / {v['max_s']}" for k, v in row["where_s"].items()
            )
        )
        line = row["notifications"]
        print(
            f"  the registry's notifications, one at a time: {line['calls']} webhook calls in "
            f"{line['line_s']} s, each {line['call_median_s']} s (max {line['call_max_s']} s) and "
            f"{line['between_median_s']} s between two (max {line['between_max_s']} s); "
            f"{line['registry_retries']} sent again by the registry"
        )
        if row["moto_requests"]:
            print(
                "  moto's requests during the storm (count, wall s, CPU s): "
                + ", ".join(
                    f"{k} {v['requests']} {v['wall_s']} {v['cpu_s']}" for k, v in row["moto_requests"].items()
                )
            )
        print("  CPU during the storm (s): " + ", ".join(f"{k} {v}" for k, v in row["cpu_s"].items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
