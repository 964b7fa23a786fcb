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
printed beside, not in the push's time. So is what the first push after a start costs over a warm
one, part by part (``first_over_warm_ms``): what the containers' warming (``tagpin.warming``) left
to the first calls shows in the webhook's and the consumer's parts.

    python -m bench.latency [--pushes 11] [--containers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "latency.json"
REPOSITORY = "demo/web"  # followed by the local stack's own configuration
POLL_S = 0.01


def one_push(st: Any, n: int) -> dict[str, Any]:
    from tagpin_local.oci import push_image

    webhook, consumer = st.functions["webhook"], st.functions["consumer"]
    w0, c0 = len(webhook.history), len(consumer.history)
    pushing = time.monotonic()
    digest = push_image(st.registry.url, REPOSITORY, "stable")
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
    seen = time.monotonic()

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
    # the HTTP call that queued it: the last call that answered before the check was invoked (an
    # earlier one: a blob's notification); the check itself when none did
    http = next((i for i in reversed(hooks[:-1]) if i.finished <= hook.requested), hook)
    handed = min(hook.finished, run.requested)  # the consumer may start before the webhook returns
    marks = [  # each part an interval, clipped to [pushed, seen]: the parts add up to the total
        ("notification", pushed, http.requested),
        ("webhook queues it", http.requested, http.finished),
        ("notifications queue + receive loop", http.finished, hook.requested),
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
        "webhook_first_call": http.first,
        "webhook_check_first_call": hook.first,
        "consumer_first_call": run.first,
        "webhook_calls": len(hooks),
        "consumer_calls": len(list(consumer.history)[c0:]),
    }


def measure(pushes: int, containers: int) -> dict[str, Any]:
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
        rows = [one_push(st, n) for n in range(pushes)]
        containers_s = {
            name: [round(s * 1000) for s in f.container_start_s] for name, f in st.functions.items()
        }
    warm = [r["push_to_patch_ms"] for r in rows[1:]]
    where_median = (
        {k: round(statistics.median(r["where_ms"][k] for r in rows[1:]), 1) for k in rows[0]["where_ms"]}
        if warm
        else {}
    )
    return {
        "containers": containers,
        "stack_start_s": round(start_s, 2),
        "container_start_ms": containers_s,
        "first": rows[0],
        "warm": {
            "pushes": len(warm),
            "median_ms": round(statistics.median(warm), 1) if warm else None,
            "p90_ms": round(sorted(warm)[int(0.9 * (len(warm) - 1))], 1) if warm else None,
            "where_median_ms": where_median,
            "consumer_after_patch_median_ms": (
                round(statistics.median(r["consumer_after_patch_ms"] for r in rows[1:]), 1) if warm else None
            ),
        },
        # What the first push after a start costs over a warm one, part by part (negative: less).
        "first_over_warm_ms": {k: round(rows[0]["where_ms"][k] - v, 1) for k, v in where_median.items()},
        "pushes": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pushes", type=int, default=11, help="the first and 10 warm")
    parser.add_argument("--containers", type=int, default=1, help="containers per function")
    parser.add_argument(
        "--cold-containers",
        action="store_true",
        help="containers only load their handler (no tagpin.warming): the first push pays the rest",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go (JSON)")
    args = parser.parse_args()
    if args.cold_containers:
        os.environ["TAGPIN_LOCAL_WARM"] = "0"
    from bench.runinfo import Run

    run = Run.begin("latency")  # the cold variant's file is not stamped by make: stamped here
    result = measure(args.pushes, args.containers)
    for r in result["pushes"]:
        where = ", ".join(f"{k} {v:.0f}" for k, v in r["where_ms"].items())
        print(f"push {r['push']:>2}: {r['push_to_patch_ms']:7.0f} ms  ({where})")
    warm = result["warm"]
    print(
        f"\nfirst push after a start: {result['first']['push_to_patch_ms']:.0f} ms; warm: median "
        f"{warm['median_ms']} ms, p90 {warm['p90_ms']} ms of {warm['pushes']}"
    )
    print(
        "warm, median per part (ms): " + ", ".join(f"{k} {v:.0f}" for k, v in warm["where_median_ms"].items())
    )
    first = result["first"]
    over = ", ".join(f"{k} {v:+.0f}" for k, v in result["first_over_warm_ms"].items())
    print(f"the first push over a warm one, per part (ms): {over}")
    print(
        f"the consumer's own work after the patch (ms): first {first['consumer_after_patch_ms']:.0f}, "
        f"warm median {warm['consumer_after_patch_median_ms']}"
    )
    print(f"containers started with the stack (ms): {result['container_start_ms']}")
    document = {**result, "warmed_containers": not args.cold_containers}
    if args.cold_containers:
        run.write(RESULTS.with_name("latency-cold-containers.json"), document)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(document, indent=2) + "\n")
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
