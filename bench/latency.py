"""Push -> patch latency on the local stack, one push at a time: the first push after the stack
started and the warm ones after it, and where each one's time goes.

The stack runs as ``make demo`` and ``tagpin local`` run it (registry notifications to the webhook,
the SQS loop feeding the consumer, its own configuration following demo/web:stable); one
Deployment runs the tag, and the first push after the start is the first change. Each push is timed from
the moment the registry serves the new manifest to the moment the Deployment's spec carries the new
digest (read through the Kubernetes API every 10 ms). Its time is cut, from the functions'
invocation records (``LocalFunction.history``), into these intervals, each clipped to the push's
(the registry notifies before the push returns, so a part can start before it):

* notification: the push done -> the webhook invoked over HTTP (the registry's notification);
* webhook queues it: that HTTP call (a container waited for included), which authenticates and
  queues the notification on the notifications queue, and answers;
* notifications queue + receive loop: answered -> the webhook's check invoked (SQS and the loop
  that receives from it, as Lambda's event source does);
* webhook check container wait: a container started or waited for;
* webhook check: its handler's own time (re-resolve, record, enqueue the change), until the
  consumer is invoked (it may return after: its send to the queue is not its last step);
* changes queue + receive loop: the check done -> the consumer's handler started;
* consumer container start or wait: a container started for this push, or waited for (0 when
  one was idle);
* consumer to the patch: its handler started -> the patch seen from outside (every 10 ms).

The consumer's own time after the patch (its bookkeeping, the rollout's verification enqueued) is
printed beside, not in the push's time.

Beside the intervals, each push's CPU (``cpu_ms``, push -> patch seen; deterministic where the wall
figures of a shared machine are not): of the stack's process by its threads' roles (this bench's
own pushes and reads, the webhook's checks, the consumer's invocations, the rest: moto's requests,
the HTTP servers', pools'), and of each of the stack's other processes (the registry, etcd,
kube-apiserver, controller-manager, scheduler, kwok). The bench's own first calls (its read of the
Deployment by kind, which discovers every API group; its registry client) are made before the first
push (``--cold-observer``: in it, as before): they took the GIL from the first push's checks.

The first push after a start is measured after several starts (``--starts``, 5), each a process of
its own as `tagpin local` is (nothing an earlier start built is there), each followed by warm pushes
(``--pushes`` in all, 5). Each start's first push is compared with the warm ones of the same start
(same minute, same load), part by part and in all, the consumer's own work after the patch too;
``first_over_warm_ms`` is the median of that excess over the starts, ``first_over_warm_spread_ms``
its spread (min, max, each start's). What the containers' warming (``tagpin.warming``) left to the
first calls shows in the webhook's and the consumer's parts. ``first`` is the first push, the
median over the starts; ``warm`` the warm pushes of every start, pooled.

    python -m bench.latency [--starts 5] [--pushes 5] [--containers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "latency.json"
REPOSITORY = "demo/web"  # followed by the local stack's own configuration
POLL_S = 0.01
CPU = "cpu: "  # a key of first_over_warm_ms: the CPU of one role's threads (THREAD_ROLES)
FIRST_CALLS = ("webhook_first_call", "webhook_check_first_call", "consumer_first_call")


# The stack's threads by what they run (their names' start): CPU seconds of each, push -> patch seen.
# The event sources' pollers invoke the functions in their own thread (thread containers): the
# notifications pollers' CPU is the webhook's checks (and their receives), the changes pollers' the
# consumer's invocations. The HTTP servers' threads (moto's, the webhook adapter's) each serve one
# connection and end: what they spent is the process's CPU less the named threads' ("short-lived").
THREAD_ROLES = (
    ("MainThread", "this bench (push, reads of the Deployment)"),
    ("sqs-notifications", "webhook check (notifications pollers)"),
    ("sqs-changes", "consumer (changes pollers)"),
)


def thread_cpu() -> dict[int, tuple[str, float]]:
    """Each running thread's CPU seconds so far, by its id (with its name)."""
    found = {}
    for t in threading.enumerate():
        if t.ident is None:
            continue
        try:
            found[t.ident] = (t.name, time.clock_gettime(time.pthread_getcpuclockid(t.ident)))
        except (OSError, ProcessLookupError):  # it ended meanwhile
            continue
    return found


def cpu_by_role(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], total: float
) -> dict[str, float]:
    """The CPU ms each role's threads spent between ``before`` and ``after``, the rest of the
    process's ``total`` (seconds) under "other threads" (moto's requests, HTTP servers', pools')."""
    spent = {role: 0.0 for _, role in THREAD_ROLES}
    named = 0.0
    for ident, (name, seconds) in after.items():
        role = next((r for prefix, r in THREAD_ROLES if name.startswith(prefix)), None)
        if role is None:
            continue
        delta = seconds - before.get(ident, (name, 0.0))[1]
        spent[role] += delta
        named += delta
    spent["other threads (moto's requests, HTTP servers, pools)"] = total - named
    return {k: round(v * 1000, 1) for k, v in spent.items()}


def _descendants() -> dict[int, str]:
    """This process's descendants (the stack's registry, kube-apiserver, etcd, controller-manager,
    kwok, ...): their names by pid, read from /proc."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)], names[int(entry.name)] = int(rest[1]), name
    found: dict[int, str] = {}
    frontier = [os.getpid()]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found[child] = names[child]
                frontier.append(child)
    return found


def processes_cpu(pids: dict[int, str]) -> dict[str, float]:
    """The CPU seconds so far of each of ``pids``' processes (every thread's, from the scheduler's
    nanosecond counters: /proc/<pid>/task/*/schedstat), summed by process name."""
    spent: dict[str, float] = {}
    for pid, name in pids.items():
        total = 0
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue
        spent[name] = spent.get(name, 0.0) + total / 1e9
    return spent


def one_push(st: Any, n: int, http: Any = None, pids: dict[int, str] | None = None) -> dict[str, Any]:
    from tagpin_local.oci import push_image

    webhook, consumer = st.functions["webhook"], st.functions["consumer"]
    w0, c0 = len(webhook.history), len(consumer.history)
    running, cpu = {t.ident for t in threading.enumerate()}, time.process_time()
    threads_before, processes_before = thread_cpu(), processes_cpu(pids or {})
    pushing = time.monotonic()
    digest = push_image(st.registry.url, REPOSITORY, "stable", http=http)
    pushed = time.monotonic()
    deadline = pushed + 60
    missed = pushing  # the patch came after the last read that did not show it
    while time.monotonic() < deadline:
        reading = time.monotonic()
        spec = st.kube.get("Deployment", "default", "web")["spec"]["template"]["spec"]
        if spec["containers"][0]["image"].endswith("@" + digest):
            break
        missed = reading
        time.sleep(POLL_S)
    else:
        raise SystemExit(f"push {n}: not patched within 60 s")
    seen, cpu = time.monotonic(), time.process_time() - cpu
    cpu_where = cpu_by_role(threads_before, thread_cpu(), cpu)
    processes_after = processes_cpu(pids or {})
    cpu_where |= {
        f"process {name}": round((processes_after.get(name, 0.0) - seconds) * 1000, 1)
        for name, seconds in processes_before.items()
    }
    # threads the push left running in this process (the functions' thread containers, moto): a pool's
    # worker, a client's loop, which a warm push reuses
    kept = sorted(t.name for t in threading.enumerate() if t.ident not in running)

    def patching() -> list[Any]:  # the consumer calls running when the patch was made
        calls = list(consumer.history)[c0:]
        return [i for i in calls if i.started <= seen and i.finished >= missed]

    while time.monotonic() < deadline and not patching():  # recorded when it returns
        time.sleep(POLL_S)
    runs = patching()
    if not runs:
        raise SystemExit(f"push {n}: no consumer invocation recorded around the patch")
    run = max(runs, key=lambda i: i.started)  # not a verification of an earlier push, finished before
    hooks = [i for i in list(webhook.history)[w0:] if pushing <= i.started <= run.requested]
    if not hooks:
        raise SystemExit(f"push {n}: no webhook invocation recorded before the consumer's")
    hook = hooks[-1]  # the check that sent the change (its SQS invocation)
    # the HTTP call that queued it: the last call invoked before the check was (an earlier one: a
    # blob's notification); the check itself when none was. It may return after the check was
    # invoked (its message received while it answers): its part ends there, the parts never overlap.
    http = next((i for i in reversed(hooks[:-1]) if i.requested <= hook.requested), hook)
    queued = min(http.finished, hook.requested) if http is not hook else hook.requested
    handed = min(hook.finished, run.requested)  # the consumer may start before the webhook returns
    marks = [  # each part an interval, clipped to [pushed, seen]: the parts add up to the total
        ("notification", pushed, http.requested),
        ("webhook queues it", http.requested, queued),
        ("notifications queue + receive loop", queued, hook.requested),
        ("webhook check container wait", hook.requested, hook.started),
        ("webhook check", hook.started, handed),
        ("changes queue + receive loop", handed, run.requested),
        ("consumer container start or wait", run.requested, run.started),
        ("consumer to the patch", run.started, seen),
    ]
    where = {name: min(max(b, pushed), seen) - min(max(a, pushed), seen) for name, a, b in marks}
    return {
        "push": n,
        "push_to_patch_ms": round((seen - pushed) * 1000, 1),
        "where_ms": {k: round(max(0.0, v) * 1000, 1) for k, v in where.items()},
        "consumer_after_patch_ms": round((run.finished - seen) * 1000, 1),
        "stack_cpu_ms": round(cpu * 1000, 1),  # this process's CPU, push -> patch seen (moto's too)
        "cpu_ms": cpu_where,  # stack_cpu_ms by thread role (THREAD_ROLES)
        "threads_started": kept,
        "webhook_first_call": http.first,
        "webhook_check_first_call": hook.first,
        "consumer_first_call": run.first,
        "webhook_calls": len(hooks),
        "consumer_calls": len(list(consumer.history)[c0:]),
    }


def measure_start(pushes: int, containers: int, cold_observer: bool = False) -> dict[str, Any]:
    """One start of the stack: its first push, then ``pushes - 1`` warm ones.

    The bench's own first calls are made before the first push, not in it (``cold_observer``: as
    before, in it): its read of the Deployment by kind, whose first one discovers every API group
    of the cluster and writes the kubernetes client's discovery cache (a JSON file of the whole
    discovery: tens of ms of this process's CPU, taken under the GIL from the stack's threads while
    they check and patch the first push), and its HTTP client to the registry (one for every push,
    not one a push: an SSL context each, 20-25 ms of CPU)."""
    import httpx
    from tagpin_local.kube.manifests import deployment
    from tagpin_local.stack import LocalStack, StackOptions

    started = time.monotonic()
    with LocalStack(StackOptions(notifications=True, consume=True, containers=containers)) as st:
        assert st.registry is not None
        start_s = time.monotonic() - started
        # As `make demo` and `tagpin local` run: the stack's own configuration follows demo/web:stable
        # (written before the functions start); a Deployment runs the tag; the first push follows.
        image = f"{st.registry.host}/{REPOSITORY}:stable"
        st.kube.create(deployment("web", "default", image, container="web"))
        pids = _descendants()
        if cold_observer:
            rows = [one_push(st, n, None, pids) for n in range(pushes)]
        else:
            st.kube.get("Deployment", "default", "web")  # one_push's read, its discovery done
            with httpx.Client(timeout=30.0) as http:
                rows = [one_push(st, n, http, pids) for n in range(pushes)]
        containers_s = {
            name: [round(s * 1000) for s in f.container_start_s] for name, f in st.functions.items()
        }
    return {"stack_start_s": round(start_s, 2), "container_start_ms": containers_s, "pushes": rows}


def fresh_start(pushes: int, containers: int, cold_observer: bool = False) -> dict[str, Any]:
    """``measure_start`` in a process of its own, as `tagpin local` starts: nothing the process
    built for an earlier start (modules, clients, caches) is there at this start's first push."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "start.json"
        command = [sys.executable, "-m", "bench.latency", "--one-start", "--out", str(out)]
        command += ["--pushes", str(pushes), "--containers", str(containers)]
        command += ["--cold-observer"] if cold_observer else []
        subprocess.run(command, check=True, cwd=Path(__file__).parents[1])
        start: dict[str, Any] = json.loads(out.read_text())
        return start


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def _spread(values: list[float]) -> dict[str, Any]:
    return {"median": _median(values), "min": min(values), "max": max(values), "each": values}


def summarise(starts: list[dict[str, Any]], containers: int) -> dict[str, Any]:
    """Each start's first push against its own warm pushes (same minute, same load), then the
    median and the spread of that excess over the starts; the warm pushes of every start pooled."""
    firsts = [s["pushes"][0] for s in starts]
    warm_rows = [r for s in starts for r in s["pushes"][1:]]
    parts = list(firsts[0]["where_ms"])
    roles = [CPU + role for role in firsts[0].get("cpu_ms", {})]

    def over(key: str, start: dict[str, Any]) -> float:  # its first push over its warm ones' median
        def value(row: dict[str, Any]) -> float:
            if key in roles:
                return float(row["cpu_ms"].get(key.removeprefix(CPU), 0.0))
            return float(row["where_ms"][key] if key in parts else row[key])

        first, *warm = start["pushes"]
        return round(value(first) - statistics.median(value(r) for r in warm), 1)

    keys = ["push_to_patch_ms", *parts, "consumer_after_patch_ms", "stack_cpu_ms", *roles]
    spread = {k: _spread([over(k, s) for s in starts]) for k in keys}
    warm = [r["push_to_patch_ms"] for r in warm_rows]
    where_median = {k: _median([r["where_ms"][k] for r in warm_rows]) for k in parts}
    first = {  # the first push after a start: the median over the starts, part by part
        "starts": len(starts),
        "push_to_patch_ms": _median([r["push_to_patch_ms"] for r in firsts]),
        "where_ms": {k: _median([r["where_ms"][k] for r in firsts]) for k in parts},
        "consumer_after_patch_ms": _median([r["consumer_after_patch_ms"] for r in firsts]),
        "first_calls": all(r[k] for r in firsts for k in FIRST_CALLS),
        "threads_started": [r["threads_started"] for r in firsts],
    }
    return {
        "containers": containers,
        "starts": len(starts),
        "stack_start_s": [s["stack_start_s"] for s in starts],
        "container_start_ms": [s["container_start_ms"] for s in starts],
        "first": first,
        "warm": {
            "pushes": len(warm),
            "median_ms": _median(warm),
            "p90_ms": round(sorted(warm)[int(0.9 * (len(warm) - 1))], 1),
            "where_median_ms": where_median,
            "consumer_after_patch_median_ms": _median([r["consumer_after_patch_ms"] for r in warm_rows]),
            "cpu_median_ms": {
                k: _median([r["cpu_ms"].get(k.removeprefix(CPU), 0.0) for r in warm_rows]) for k in roles
            },
        },
        # What the first push after a start costs over the warm ones of the same start, part by part
        # (negative: less): the median over the starts, and its spread (min, max, each start's).
        "first_over_warm_ms": {k: v["median"] for k, v in spread.items()},
        "first_over_warm_spread_ms": spread,
        "pushes": [{"start": i, **r} for i, s in enumerate(starts) for r in s["pushes"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=5, help="fresh starts, each a process of its own")
    parser.add_argument("--pushes", type=int, default=5, help="per start: the first and the warm ones")
    parser.add_argument("--containers", type=int, default=1, help="containers per function")
    parser.add_argument(
        "--cold-containers",
        action="store_true",
        help="containers only load their handler (no tagpin.warming): the first push pays the rest",
    )
    parser.add_argument(
        "--cold-observer",
        action="store_true",
        help="the bench's own first read of the Deployment and registry client in the first push",
    )
    parser.add_argument("--one-start", action="store_true", help=argparse.SUPPRESS)  # fresh_start's process
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go (JSON)")
    args = parser.parse_args()
    if args.cold_containers:
        os.environ["TAGPIN_LOCAL_WARM"] = "0"  # the starts' processes inherit it
    if args.one_start:
        args.out.write_text(json.dumps(measure_start(args.pushes, args.containers, args.cold_observer)))
        return
    from bench.runinfo import Run

    run = Run.begin("latency")  # the cold variant's file is not stamped by make: stamped here
    starts = []
    for i in range(args.starts):
        starts.append(fresh_start(args.pushes, args.containers, args.cold_observer))
        for r in starts[-1]["pushes"]:
            where = ", ".join(f"{k} {v:.0f}" for k, v in r["where_ms"].items())
            print(f"start {i} push {r['push']}: {r['push_to_patch_ms']:5.0f} ms  ({where})", flush=True)
    result = summarise(starts, args.containers)
    warm, first = result["warm"], result["first"]
    print(
        f"\nfirst push after a start: median {first['push_to_patch_ms']:.0f} ms of {first['starts']} starts; "
        f"warm: median {warm['median_ms']} ms, p90 {warm['p90_ms']} ms of {warm['pushes']}"
    )
    parts = ", ".join(f"{k} {v:.0f}" for k, v in warm["where_median_ms"].items())
    print(f"warm, median per part (ms): {parts}")
    cpu = ", ".join(f"{k.removeprefix(CPU)} {v:.0f}" for k, v in warm["cpu_median_ms"].items())
    print(f"warm, median CPU of the stack's process by thread (ms): {cpu}")
    print("the first push over the warm ones of its start, per part (ms): median [min, max] of the starts")
    for part, v in result["first_over_warm_spread_ms"].items():
        each = " ".join(f"{x:+.0f}" for x in v["each"])
        print(f"  {part:<38}{v['median']:+7.1f}  [{v['min']:+.0f}, {v['max']:+.0f}]  ({each})")
    print(f"stack starts (s): {result['stack_start_s']}")
    warm_threads = sorted({n for r in result["pushes"] if r["push"] > 0 for n in r["threads_started"]})
    print(f"threads left running: by each first push {first['threads_started']}, by warm ones {warm_threads}")
    document = {**result, "warmed_containers": not args.cold_containers, "cold_observer": args.cold_observer}
    if args.cold_containers:
        run.write(RESULTS.with_name("latency-cold-containers.json"), document)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(document, indent=2) + "\n")
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
