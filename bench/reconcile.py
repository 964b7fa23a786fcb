"""Reconcile at scale: 1,000 labelled workloads over 3 clusters, time and API calls per run.

Three real Kubernetes control planes (tools/tagpin_local/kube: kube-apiserver, its controllers,
kwok for the kubelets, on 127.0.0.1), reached through kubeconfigs with the official client as the
ServiceAccount bound to docs/rbac.yaml, exactly as the reconciler reaches a cluster (through a
front that counts the requests), DynamoDB and SQS on moto in-process (a Query reads one partition,
as DynamoDB does: tagpin_local.moto_partitions; moto's own Query sorts the whole table, 3,309 items
for each of a steady run's 64 Queries, about 1 s of CPU that is moto's, not the reconciler's;
``--moto-as-is`` keeps it),
the real Detector and state store, and an in-process registry stub that counts the tags it is asked
to resolve (the registry's own latency is not part of these figures; bench/poll.py measures it).

The workloads: Deployments, StatefulSets, DaemonSets and CronJobs (60/15/15/10 %) in 30 namespaces
per cluster, following 40 distinct tags; a quarter run an unpinned tag (so what they run is read
from their pods' imageID), the rest are pinned (a tenth of those to an old digest: behind).

Runs: 1 = first discovery (empty index); 2 = steady state; 3 = after 50 manual edits and 20
deletions. Each run reports wall time, Kubernetes API requests (per cluster, by verb), registry
resolves, DynamoDB and SQS calls, targets behind and enqueued changes.

Usage:  .venv/bin/python bench/reconcile.py [--workloads 1000] [--clusters 3] [--runs-each 3] [--moto-as-is]
Writes bench/results/reconcile.json and prints a table.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import itertools
import json
import logging
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "common"), str(ROOT / "tools")]

import boto3  # noqa: E402
import yaml  # noqa: E402
from moto import mock_aws  # noqa: E402
from tagpin.adapters.dynamodb import dynamodb_state  # noqa: E402
from tagpin.adapters.kubernetes.clusters import ClusterConnector  # noqa: E402
from tagpin.adapters.sqs import SqsChangeQueue  # noqa: E402
from tagpin.domain.config import parse_config  # noqa: E402
from tagpin.domain.messages import Change  # noqa: E402
from tagpin.domain.refs import Digest, ImageRef  # noqa: E402
from tagpin.ports.registry import Resolution  # noqa: E402
from tagpin.usecases.apply import Applier  # noqa: E402
from tagpin.usecases.detect import Detector  # noqa: E402
from tagpin.usecases.followed import Followed  # noqa: E402
from tagpin.usecases.reconcile import Reconciler  # noqa: E402
from tagpin_local import moto_partitions, moto_transactions  # noqa: E402
from tagpin_local.kube.local import LocalCluster  # noqa: E402
from tagpin_local.kube.manifests import cronjob, daemonset, deployment, statefulset  # noqa: E402
from tagpin_local.kube.pool import start_all  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "reconcile.json"
REGISTRY = "registry.bench.example"
FOLLOW = {"tagpin.dev/follow": "true"}
LISTED = ("deployments", "statefulsets", "daemonsets", "cronjobs", "rollouts", "pods")


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class Registry:
    """Answers every tag with its current digest; counts resolves."""

    def __init__(self, tags: list[str]) -> None:
        self.current = {t: digest(t + "#1") for t in tags}
        self.calls = 0
        self._lock = threading.Lock()

    def resolve(self, ref: ImageRef) -> Resolution:
        with self._lock:
            self.calls += 1
        return Resolution(
            ref, Digest(self.current[ref.tagged]), "application/vnd.oci.image.index.v1+json", "HEAD"
        )


class Calls:
    """Counts boto3 API calls by service and operation (botocore's before-call event)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def hook(self, client: Any) -> Any:
        service = client.meta.service_model.service_name

        def count(model: Any, **_: Any) -> None:
            with self._lock:
                self.counts[f"{service}:{model.name}"] += 1

        client.meta.events.register("before-call", count)
        return client


def build_world(
    sims: list[LocalCluster], workloads: int, tags: list[str], registry: Registry
) -> list[tuple[LocalCluster, str, str, str, str]]:
    """Create the workloads; returns (cluster, kind, namespace, name, repository) of each, once every
    pod runs (an unpinned workload's pods report the digest they run)."""
    made: list[tuple[LocalCluster, str, str, str, str]] = []
    kinds = (["Deployment"] * 12) + (["StatefulSet"] * 3) + (["DaemonSet"] * 3) + (["CronJob"] * 2)
    for i in range(workloads):
        sim = sims[i % len(sims)]
        kind = kinds[i % len(kinds)]
        ns = f"team{(i // len(sims)) % 30}"
        name = f"w{i}"
        tag = tags[i % len(tags)]
        repo = tag.rsplit(":", 1)[0]
        current = registry.current[tag]
        if i % 4 == 0:
            image = tag  # unpinned: what runs comes from the pods
        elif i % 10 == 1:
            image = f"{tag}@{digest(tag + '#0')}"  # pinned to an old digest: behind
        else:
            image = f"{tag}@{current}"
        if kind == "Deployment":
            obj = deployment(name, ns, image, container="app", replicas=1, labels=FOLLOW)
        elif kind == "StatefulSet":
            obj = statefulset(name, ns, image, container="app", labels=FOLLOW)
        elif kind == "DaemonSet":
            obj = daemonset(name, ns, image, container="app", labels=FOLLOW)
        else:
            obj = cronjob(name, ns, image, container="app", labels=FOLLOW)
        sim.create(obj)
        made.append((sim, kind, ns, name, repo))
    for sim in sims:
        want = sum(1 for s, kind, *_ in made if s is sim and kind != "CronJob")
        deadline = time.monotonic() + 900
        while (ready := running_pods(sim)) < want:
            if time.monotonic() > deadline:
                raise SystemExit(f"{ready} of {want} pods running in {sim.name} after 900 s")
            time.sleep(2)
    return made


def running_pods(sim: LocalCluster) -> int:
    return sum(1 for p in sim.list("Pod") if (p.get("status") or {}).get("phase") == "Running")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--tags", type=int, default=40)
    parser.add_argument("--runs-each", type=int, default=3, help="repetitions of the steady-state run")
    parser.add_argument("--moto-as-is", action="store_true", help="keep moto's whole-table sort per Query")
    args = parser.parse_args()
    if args.moto_as_is:
        os.environ[moto_partitions.AS_IS] = "1"
    partitioned = moto_partitions.install()
    # A target's state and its history item are one transaction: moto's own deep-copies the whole
    # table for it, while the reconciler's pool threads write the table (moto in process has no
    # lock: "dictionary changed size during iteration"); this one saves the items it names.
    moto_transactions.install()
    logging.disable(logging.WARNING)
    for key, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ[key] = value
    os.environ.pop("AWS_ENDPOINT_URL", None)

    tags = [f"{REGISTRY}/team/svc{i}:stable" for i in range(args.tags)]
    registry = Registry(tags)
    names = [f"c{i}" for i in range(args.clusters)]
    kubes = start_all(names)
    sims = [LocalCluster(kubes[n], n) for n in names]
    for sim in sims:
        # unpinned workloads' pods report the tag's current digest, as if pulled just now
        for tag in tags:
            sim.set_image_id(tag, registry.current[ImageRef.parse(tag).tagged])
    t0 = time.perf_counter()
    made = build_world(sims, args.workloads, tags, registry)
    setup_s = time.perf_counter() - t0
    kubeconfigs = {
        f"tagpin/clusters/{n}": yaml.safe_dump(s.kubeconfig()) for n, s in zip(names, sims, strict=True)
    }
    config = parse_config(
        yaml.safe_dump(
            {"clusters": {n: {"kubeconfig": {"secret": f"tagpin/clusters/{n}", "context": n}} for n in names}}
        )
    )
    runs: list[dict[str, Any]] = []
    with mock_aws():
        calls = Calls()
        ddb = calls.hook(boto3.client("dynamodb", region_name="us-east-1"))
        sqs = calls.hook(boto3.client("sqs", region_name="us-east-1"))
        ddb.create_table(
            TableName="state",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        url = sqs.create_queue(
            QueueName="changes.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}
        )["QueueUrl"]
        store = dynamodb_state(ddb, "state")
        queue = SqsChangeQueue(sqs, url)
        connector = ClusterConnector(lambda: config, kubeconfigs.__getitem__)
        reconciler = Reconciler(
            config=lambda: config,
            state=store,
            clusters=connector,
            detector=Detector(registry, store, queue, confirm_delays=()),
            queue=queue,
            clock=lambda: time.time_ns() // 1_000_000,
        )

        applier = Applier(
            followed=lambda: Followed(config, store),
            state=store,
            workloads=connector,
            clock=lambda: time.time_ns() // 1_000_000,
        )

        def consume() -> int:
            """The consumer's work between runs (not measured): apply every queued change."""
            applied = 0
            while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
                for message in messages:
                    applier.apply(Change.model_validate_json(message["Body"]))
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                    applied += 1
            return applied

        def run(label: str) -> dict[str, Any]:
            for sim in sims:
                sim.clear_requests()
            calls.counts.clear()
            registry.calls = 0
            start = time.perf_counter()
            report = reconciler.run(label)
            elapsed = time.perf_counter() - start
            kube: dict[str, dict[str, int]] = {}
            for name, sim in zip(names, sims, strict=True):
                verbs = collections.Counter(
                    ("LIST pods" if r.path.endswith("/pods") else "LIST workloads")
                    if r.method == "GET" and r.path.rsplit("/", 1)[-1] in LISTED
                    else f"{r.method} one"
                    for r in sim.requests
                )
                kube[name] = dict(verbs)
            summary = report.summary()
            return {
                "run": label,
                "seconds": round(elapsed, 3),
                "kubernetes_requests": sum(sum(v.values()) for v in kube.values()),
                "kubernetes_by_cluster": kube,
                "registry_resolves": registry.calls,
                "dynamodb_calls": sum(v for k, v in calls.counts.items() if k.startswith("dynamodb")),
                "sqs_calls": sum(v for k, v in calls.counts.items() if k.startswith("sqs")),
                "aws_by_operation": dict(sorted(calls.counts.items())),
                "workloads": sum(c["workloads"] for c in summary["clusters"].values()),
                "targets": summary["targets"],
                "images": summary["images"],
                "added": summary["added"],
                "removed": summary["removed"],
                "behind": summary["behind"],
                "enqueued": summary["enqueued"],
            }

        runs.append(run("first (empty index)"))
        runs[-1]["changes_applied_after"] = consume()
        steady = [run(f"steady {i + 1}") for i in range(args.runs_each)]
        runs.extend(steady)
        # 50 manual edits (an old digest pinned by hand) and 20 deletions
        for sim, kind, ns, name, repo in itertools.islice(made[1::7], 50):
            tag = next(t for t in tags if t.startswith(repo + ":"))
            spec = {
                "template": {"spec": {"containers": [{"name": "app", "image": f"{tag}@{digest('manual')}"}]}}
            }
            sim.patch(
                kind,
                ns,
                name,
                {"spec": {"jobTemplate": {"spec": spec}}} if kind == "CronJob" else {"spec": spec},
            )
        for sim, kind, ns, name, _ in made[3::50][:20]:
            sim.delete(kind, ns, name)
        runs.append(run("after 50 edits, 20 deletions"))
        runs[-1]["changes_applied_after"] = consume()
        runs.append(run("healed"))
    memory = {sim.name: round(sum(sim.kube.rss().values()) / 2**20) for sim in sims}
    for sim in sims:
        sim.close()
        sim.kube.stop()

    result = {
        "what": f"reconcile of {args.workloads} labelled workloads over {args.clusters} clusters",
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "setup_seconds": round(setup_s, 2),
        "control_plane_rss_mib": memory,
        "tags": args.tags,
        "moto": "Query reads its partition" if partitioned else "as is (whole-table sort per Query)",
        "runs": runs,
        "steady_median_seconds": round(statistics.median(r["seconds"] for r in steady), 3),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['what']} ({args.tags} tags), python {platform.python_version()}, {os.cpu_count()} cpus")
    columns = ("s", "k8s req", "registry", "dynamodb", "sqs", "targets", "behind", "enq", "+", "-")
    print(f"{'run':<30}" + "".join(f"{c:>9}" for c in columns))
    for r in runs:
        keys = ("kubernetes_requests", "registry_resolves", "dynamodb_calls", "sqs_calls", "targets")
        values = [r[k] for k in (*keys, "behind", "enqueued", "added", "removed")]
        print(f"{r['run']:<30}{r['seconds']:>9.2f}" + "".join(f"{v:>9}" for v in values))
    for r in runs[:2]:
        print(f"  {r['run']}: kubernetes requests by cluster {r['kubernetes_by_cluster']}")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
