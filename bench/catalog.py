"""Every benchmark: its make target, the results file it writes, the code it measures and how long
it runs. ``covers`` is what makes a result stale: a commit after the one a result was measured at
that touches any of these paths (``make bench-check`` lists it; ``bench/figures.py``).

Kept in one small module that imports nothing, so that the check stays cheap (CI runs it)."""

from __future__ import annotations

from dataclasses import dataclass

LIB = "layers/common/tagpin"


@dataclass(frozen=True)
class Bench:
    name: str  # the results file: bench/results/<name>.json
    target: str  # make target
    covers: tuple[str, ...]  # paths (files or folders) whose change makes its results stale
    minutes: float  # how long `make <target>` ran here (2 cores shared, load 8-15, 2026-11-26)
    what: str


# The poll's own path: what a scheduled poll runs, state layout included.
POLL_PATH = (
    f"{LIB}/usecases/poll.py",
    f"{LIB}/usecases/poll_summary.py",
    f"{LIB}/usecases/detect.py",
    f"{LIB}/usecases/attestations.py",
    f"{LIB}/adapters/registry",
    f"{LIB}/adapters/dynamodb",
    f"{LIB}/ports",
    f"{LIB}/domain/shards.py",
)
# The whole local stack: every handler, the library, the local runtime and the simulators.
STACK = ("functions", "layers", "tools/tagpin_local", "template.yaml")

BENCHES: tuple[Bench, ...] = (
    Bench(
        "poll",
        "bench-poll",
        (
            *POLL_PATH,
            "bench/poll.py",
            "tools/tagpin_local/registry_server.py",
            "tools/tagpin_local/faultproxy.py",
        ),
        16,
        "poll throughput vs the registry's ceiling (wrk) and skopeo; steady, settling and every tag moved",
    ),
    Bench(
        "coldstart",
        "bench-coldstart",
        (
            "functions",
            "layers",
            "template.yaml",
            "bench/coldstart.py",
            "bench/coldstart_first.py",
            "bench/coldstart_artifacts.py",
            "tools/tagpin_local/firstcall.py",
        ),
        12,
        "import time of each built handler, package sizes, the first invocation of the webhook's HTTP call, "
        "its check and the poller",
    ),
    Bench(
        "webhook",
        "bench-webhook",
        (
            "functions/webhook",
            f"{LIB}/usecases/webhook.py",
            f"{LIB}/usecases/webhook_check.py",
            f"{LIB}/usecases/webhook_events.py",
            f"{LIB}/adapters/webhooks",
            f"{LIB}/adapters/dynamodb",
            "bench/webhook.py",
        ),
        0.5,
        "one delivery of up to 1,000 unfollowed events at the webhook handler",
    ),
    Bench(
        "concurrency",
        "bench-concurrency",
        (*STACK, "bench/concurrency.py", "bench/stages.py"),
        5,
        "50 tags pushed at once",
    ),
    Bench(
        "gitops",
        "bench-gitops",
        (*STACK, "bench/gitops.py"),
        4,
        "one push moving 500 Argo-owned workloads in 50 Git repositories: push -> commit per repository",
    ),
    Bench(
        "latency",
        "bench-latency",
        (*STACK, "bench/latency.py"),
        2,
        "push -> patch on the local stack: the first push after a start and warm ones, where the time goes",
    ),
    Bench(
        "reconcile",
        "bench-reconcile",
        (
            f"{LIB}/usecases/reconcile.py",
            f"{LIB}/usecases/drift.py",
            f"{LIB}/usecases/discover.py",
            f"{LIB}/adapters/kubernetes",
            f"{LIB}/adapters/dynamodb",
            "bench/reconcile.py",
        ),
        2.5,
        "reconcile of 1,000 workloads over 3 simulated clusters",
    ),
    Bench("cost", "bench-cost", (*STACK, "bench/cost"), 21, "API calls per operation, priced per month"),
    Bench(
        "fanout",
        "bench-fanout",
        (*POLL_PATH, "functions/poller", f"{LIB}/adapters/lambda_parts.py", "bench/fanout.py"),
        6,
        "one poll round of 5,000 tags in 1/4/16 parts",
    ),
    Bench(
        "tags",
        "bench-tags",
        (f"{LIB}/adapters/registry", "tools/tagpin_local/tagpager.py", "bench/tags.py"),
        2,
        "listing a repository of 10,000 tags",
    ),
    Bench(
        "console",
        "bench-console",
        (
            "functions/console",
            f"{LIB}/console",
            f"{LIB}/usecases",
            f"{LIB}/adapters/dynamodb",
            "tools/tagpin_local",
            "bench/console.py",
        ),
        4,
        "every console page at 10,000 targets in three shapes, in process and over HTTP",
    ),
    Bench(
        "hanging_registry",
        "bench-hanging",
        (f"{LIB}/adapters/registry", f"{LIB}/usecases/poll.py", "bench/hanging_registry.py"),
        1.5,
        "frozen and slow registries beside the real one, poll after poll",
    ),
)

BY_NAME = {b.name: b for b in BENCHES}
