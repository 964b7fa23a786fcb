"""What tagpin costs to run: API calls per operation, measured through the real handlers, priced.

For N followed tags (default 100, 1,000, 10,000; one label-discovered target each) the local stack
(``tools/tagpin_local/stack.py``: the real handlers, a moto server, the real CNCF registry behind
a request-counting proxy, the Kubernetes API simulator) runs:

  (a) a steady-state scheduled poll (nothing changed), the real poller handler;
  (b) one change end to end: a new digest pushed under one tag, seen by the poll (its extra calls
      over (a) are the detection cost) and, for a second tag, by a registry notification through
      the real webhook handler; each change then applied by the real consumer handler as Lambda's
      SQS event source does (receive, invoke, delete); when the consumer queues a rollout check,
      the real verifier handler runs it;
  (c) a steady-state reconcile run, the real reconciler handler.

Counted per operation: every AWS API call made in this process (a measurement-only wrapper
around botocore's ``BaseClient._make_api_call``: DynamoDB by operation with read/write request
units computed from consistency and item sizes, SQS, SSM, Secrets Manager, STS/EKS), the
registry requests (HEAD/GET through the proxy), the Kubernetes requests (the simulator's log),
the handler's wall time (= Lambda billed duration, pessimistic: moto on this 2-core machine
answers a DynamoDB call in milliseconds) and the bytes it logs (INFO, plus EMF metrics).

Setup that is not measured: the tags are pushed (one manifest under many tags), N labelled,
pinned Deployments are created, a first reconcile discovers them (index + tag states, the real
path), and each target's state is recorded as applied through the real state repositories
(``claim_target`` + ``finish_target``, what the consumer does) instead of N consumer runs.

The monthly cost is then computed from these figures at the template's defaults (read from
template.yaml: schedules, memory sizes, alarm count) and a price table kept here.

Usage:  .venv/bin/python bench/cost.py [--sizes 100,1000,10000] [--changes-per-1000-per-day 20]
          [--reconcile-max 10000] [--clusters 1] [--registries-with-credentials 0]
Writes bench/results/cost.json and prints a table.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import logging
import math
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "common"), str(ROOT / "tools")]

import botocore.client  # noqa: E402
import httpx  # noqa: E402
import yaml  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "cost.json"
TAGS_PER_REPO = 100
NAMESPACES = 20
FOLLOW = {"tagpin.dev/follow": "true"}
HOURS_PER_MONTH = 730  # AWS's convention for monthly estimates
LAMBDA_PLATFORM_LOG_BYTES = 350  # START, END and REPORT lines of every invocation (not measured)

# --- prices -------------------------------------------------------------------------------------
# us-east-1, on-demand list prices (USD) from the AWS pricing pages as known on PRICE_DATE.
# Prices change: check https://aws.amazon.com/pricing/ before relying on these figures.
# Free tiers are NOT subtracted in the totals (see FREE_TIER and the "after free tier" column).
PRICE_DATE = "2025-06 (DynamoDB on-demand after the 2024-11-01 reduction)"
PRICES: dict[str, float] = {
    "lambda_gb_second": 0.0000166667,  # x86_64
    "lambda_request": 0.20 / 1e6,
    "dynamodb_wru": 0.625 / 1e6,  # on-demand write request unit (standard table class)
    "dynamodb_rru": 0.125 / 1e6,  # on-demand read request unit
    "dynamodb_storage_gb_month": 0.25,
    "dynamodb_pitr_gb_month": 0.20,  # continuous backups (the state table has PITR on)
    "sqs_fifo_request": 0.50 / 1e6,  # per 64 KB chunk
    "sqs_standard_request": 0.40 / 1e6,
    "secrets_manager_secret_month": 0.40,
    "secrets_manager_api_call": 0.05 / 10_000,
    "ssm_standard_parameter_month": 0.0,  # standard tier: no storage charge, standard throughput free
    "ssm_advanced_parameter_month": 0.05,
    "cloudwatch_alarm_month": 0.10,  # standard resolution, per alarm metric
    "cloudwatch_metric_month": 0.30,  # custom metrics (EMF), first 10,000 tier
    "cloudwatch_logs_ingest_gb": 0.50,
    "cloudwatch_logs_storage_gb_month": 0.03,
    "http_api_request": 1.00 / 1e6,  # first 300 million a month
    "eventbridge_scheduled_rule_event": 0.0,  # scheduled rules (AWS::Events::Rule) are free
    "xray_trace_recorded": 5.00 / 1e6,  # Tracing: Active
    "sns_publish": 0.50 / 1e6,  # rollout notifications
}
# Always-free allowances per month (account-wide: shared with everything else in the account).
FREE_TIER: dict[str, float] = {
    "lambda_requests": 1e6,
    "lambda_gb_seconds": 400_000,
    "sqs_requests": 1e6,
    "dynamodb_storage_gb": 25,
    "cloudwatch_alarms": 10,
    "cloudwatch_metrics": 10,
    "cloudwatch_logs_gb": 5,
    "xray_traces": 100_000,
}


# --- counting ------------------------------------------------------------------------------------


def _attr_size(value: dict[str, Any]) -> int:
    """DynamoDB's size of one attribute value (bytes), as its pricing counts it."""
    (kind, v), *_ = value.items()
    if kind == "S":
        return len(str(v).encode())
    if kind == "N":
        return len(str(v).lstrip("-").replace(".", "").lstrip("0")) // 2 + 2
    if kind == "B":
        return len(v) if isinstance(v, bytes) else len(str(v))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(x)) for x in v)
    if kind == "L":
        return 3 + sum(_attr_size(x) + 1 for x in v)
    if kind == "M":
        return 3 + sum(len(k) + _attr_size(x) + 1 for k, x in v.items())
    return 0


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + _attr_size(value) for name, value in item.items())


def read_units(size: int, consistent: bool) -> float:
    return max(1, math.ceil(size / 4096)) * (1.0 if consistent else 0.5)


def write_units(size: int) -> float:
    return float(max(1, math.ceil(size / 1024)))


class AwsCalls:
    """Every boto3 call made in this process while active: by service and operation, with the
    DynamoDB request units each consumed (from consistency and item sizes; an update is billed on
    the larger of the old and new item, both under 1 KB here, so 1 WRU; a failed conditional write
    still costs its WRU)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.rru = 0.0
        self.wru = 0.0
        self.by_table: collections.Counter[str] = collections.Counter()
        self.active = False
        self._lock = threading.Lock()
        self._original: Any = None

    def install(self) -> None:
        original = botocore.client.BaseClient._make_api_call
        counter = self

        def counted(client: Any, operation: str, params: dict[str, Any]) -> Any:
            try:
                response = original(client, operation, params)
            except botocore.exceptions.ClientError as exc:
                counter.record(client.meta.service_model.service_name, operation, params, None, exc)
                raise
            counter.record(client.meta.service_model.service_name, operation, params, response, None)
            return response

        self._original = original
        setattr(botocore.client.BaseClient, "_make_api_call", counted)  # noqa: B010 (measurement wrapper)

    def uninstall(self) -> None:
        if self._original is not None:
            setattr(botocore.client.BaseClient, "_make_api_call", self._original)  # noqa: B010

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.by_table.clear()
            self.rru = self.wru = 0.0

    def record(
        self, service: str, operation: str, params: dict[str, Any], response: Any, error: Exception | None
    ) -> None:
        if not self.active:
            return
        rru, wru = 0.0, 0.0
        if service == "dynamodb":
            rru, wru = self._units(operation, params, response or {})
        with self._lock:
            self.counts[f"{service}:{operation}"] += 1
            self.rru += rru
            self.wru += wru
            table = params.get("TableName") or next(iter(params.get("RequestItems") or {"?": 0}))
            self.by_table[f"{table}:rru"] += rru  # type: ignore[assignment]
            self.by_table[f"{table}:wru"] += wru  # type: ignore[assignment]

    @staticmethod
    def _units(operation: str, params: dict[str, Any], response: dict[str, Any]) -> tuple[float, float]:
        consistent = bool(params.get("ConsistentRead"))
        if operation == "GetItem":
            return read_units(item_size(response.get("Item") or {}), consistent), 0.0
        if operation == "BatchGetItem":
            rru = 0.0
            for table, request in params["RequestItems"].items():
                found = response.get("Responses", {}).get(table, [])
                unprocessed = len((response.get("UnprocessedKeys") or {}).get(table, {}).get("Keys", []))
                strong = bool(request.get("ConsistentRead"))
                rru += sum(read_units(item_size(i), strong) for i in found)
                missing = len(request["Keys"]) - len(found) - unprocessed
                rru += missing * read_units(0, strong)
            return rru, 0.0
        if operation in ("Query", "Scan"):
            size = sum(item_size(i) for i in response.get("Items", []))
            return read_units(size, consistent), 0.0
        if operation == "PutItem":
            return 0.0, write_units(item_size(params["Item"]))
        if operation in ("UpdateItem", "DeleteItem"):
            return 0.0, write_units(item_size(response.get("Attributes") or {}))
        if operation == "BatchWriteItem":
            wru = 0.0
            for requests in params["RequestItems"].values():
                for r in requests:
                    wru += write_units(item_size(r["PutRequest"]["Item"])) if "PutRequest" in r else 1.0
            return 0.0, wru
        if operation == "TransactWriteItems":
            return 0.0, 2.0 * len(params["TransactItems"])
        if operation == "TransactGetItems":
            return 2.0 * len(params["TransactItems"]), 0.0
        return 0.0, 0.0


class LogBytes(io.TextIOBase):
    """Counts what the handlers write to stdout (powertools JSON logs, EMF metric blobs)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.metrics: set[str] = set()

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        if '"_aws"' in text:
            for line in text.splitlines():
                with contextlib.suppress(ValueError):
                    doc = json.loads(line)
                    for directive in doc.get("_aws", {}).get("CloudWatchMetrics", []):
                        for dims in directive.get("Dimensions", [[]]):
                            key = ",".join(f"{d}={doc.get(d)}" for d in dims)
                            for metric in directive.get("Metrics", []):
                                self.metrics.add(f"{directive.get('Namespace')}:{metric['Name']}[{key}]")
        return len(text)


@dataclass
class Measured:
    """One operation: what it called and how long the handler ran."""

    what: str
    invocations: int = 0
    duration_ms: list[float] = field(default_factory=list)
    aws: dict[str, int] = field(default_factory=dict)
    rru: float = 0.0
    wru: float = 0.0
    registry: dict[str, int] = field(default_factory=dict)
    kubernetes: dict[str, int] = field(default_factory=dict)
    log_bytes: int = 0
    functions: dict[str, int] = field(default_factory=dict)  # invocations by function

    def as_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "invocations": self.functions,
            "duration_ms": [round(d, 1) for d in self.duration_ms],
            "aws_calls": dict(sorted(self.aws.items())),
            "dynamodb_rru": round(self.rru, 1),
            "dynamodb_wru": round(self.wru, 1),
            "registry_requests": self.registry,
            "kubernetes_requests": self.kubernetes,
            "log_bytes": self.log_bytes,
        }


class Meter:
    """Measures one operation on the stack: AWS calls, registry and Kubernetes requests, handler
    time, log bytes."""

    def __init__(self, stack: Any, proxy: Any, calls: AwsCalls, logs: LogBytes) -> None:
        self.stack = stack
        self.proxy = proxy
        self.calls = calls
        self.logs = logs
        self.timings: list[tuple[str, float]] = []
        for name, function in stack.functions.items():
            self.wrap(name, function)

    def wrap(self, name: str, function: Any) -> None:
        """Time every invocation of a LocalFunction (the adapter and the stack call ``invoke``)."""
        function.invoke = self._timed(name, function.invoke)

    def _timed(self, name: str, invoke: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        def timed(event: dict[str, Any]) -> Any:
            started = time.perf_counter()
            try:
                return invoke(event)
            finally:
                self.timings.append((name, (time.perf_counter() - started) * 1000))

        return timed

    @contextlib.contextmanager
    def measure(self, what: str) -> Iterator[Measured]:
        result = Measured(what)
        self.calls.reset()
        self.proxy.requests.clear()
        self.stack.kube.clear_requests()
        self.timings.clear()
        before = self.logs.bytes
        self.calls.active = True
        try:
            yield result
        finally:
            self.calls.active = False
        result.aws = dict(self.calls.counts)
        result.rru, result.wru = self.calls.rru, self.calls.wru
        result.registry = dict(collections.Counter(method for method, _p, _w in self.proxy.requests))
        result.kubernetes = dict(
            collections.Counter(
                f"{r.method} {'list' if r.path.rsplit('/', 1)[-1] in LISTED else 'one'}"
                for r in self.stack.kube.requests
            )
        )
        result.duration_ms = [ms for _n, ms in self.timings]
        result.functions = dict(collections.Counter(n for n, _ms in self.timings))
        result.invocations = len(self.timings)
        result.log_bytes = self.logs.bytes - before + LAMBDA_PLATFORM_LOG_BYTES * result.invocations


LISTED = ("deployments", "statefulsets", "daemonsets", "cronjobs", "pods")


# --- the template's defaults ---------------------------------------------------------------------


class _CfnLoader(yaml.SafeLoader):
    pass


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _any_tag)  # type: ignore[no-untyped-call]


def rate_minutes(expression: str) -> float:
    """Minutes between runs of a ``rate(N unit)`` expression."""
    value, unit = expression.removeprefix("rate(").removesuffix(")").split()
    factor = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}[unit]
    return float(value) * factor


def template_defaults() -> dict[str, Any]:
    doc = yaml.load((ROOT / "template.yaml").read_text(), Loader=_CfnLoader)
    params = doc["Parameters"]
    resources = doc["Resources"]
    default_memory = doc["Globals"]["Function"]["MemorySize"]
    memory = {
        name.removesuffix("Function").lower(): r["Properties"].get("MemorySize", default_memory)
        for name, r in resources.items()
        if r["Type"] == "AWS::Serverless::Function"
    }
    return {
        "poll_schedule": params["PollSchedule"]["Default"],
        "reconcile_schedule": params["ReconcileSchedule"]["Default"],
        "memory_mb": memory,
        "alarms": sum(r["Type"] == "AWS::CloudWatch::Alarm" for r in resources.values()),
        "log_retention_days": params["LogRetentionInDays"]["Default"],
        "log_groups": sum(r["Type"] == "AWS::Logs::LogGroup" for r in resources.values()),
    }


# --- the world -----------------------------------------------------------------------------------


def images(host: str, n: int) -> list[str]:
    return [f"{host}/bench/r{i // TAGS_PER_REPO:03d}:t{i % TAGS_PER_REPO:03d}" for i in range(n)]


def push_tags(url: str, n: int) -> str:
    """One manifest per repository, put under its tags (fast); returns the digest (the same everywhere)."""
    from tagpin_local.oci import OCI_MANIFEST, _image_manifest, put_manifest, upload_blob

    repos = (n + TAGS_PER_REPO - 1) // TAGS_PER_REPO
    with httpx.Client(timeout=30) as http:
        layer = None
        bodies: dict[int, bytes] = {}
        for r in range(repos):
            layer = upload_blob(http, url, f"bench/r{r:03d}", b"tagpin cost bench layer")
            bodies[r] = _image_manifest(
                http, url, f"bench/r{r:03d}", layer, {"os": "linux", "architecture": "amd64"}
            )

    def put(indices: range) -> set[str]:
        with httpx.Client(timeout=30) as http:
            return {
                put_manifest(
                    http,
                    url,
                    f"bench/r{i // TAGS_PER_REPO:03d}",
                    f"t{i % TAGS_PER_REPO:03d}",
                    bodies[i // TAGS_PER_REPO],
                    media_type=OCI_MANIFEST,
                )
                for i in indices
            }

    with ThreadPoolExecutor(8) as pool:
        digests = set().union(*pool.map(put, [range(i, min(n, i + 250)) for i in range(0, n, 250)]))
    assert len(digests) == 1, digests
    return digests.pop()


def workload_name(image: str) -> str:
    repo, tag = image.rsplit("/", 1)[-1].split(":")
    return f"{repo}-{tag}"


def seed_target_states(stack: Any, tags: list[str], digest: str) -> None:
    """Every target applied at ``digest`` through the real state repositories (what the consumer writes)."""
    from tagpin.adapters.dynamodb import dynamodb_state
    from tagpin.domain.messages import Trigger
    from tagpin.ports.state import TargetStatus

    store = dynamodb_state(stack.client("dynamodb"), "tagpin-state")
    now = time.time_ns() // 1_000_000

    def seed(chunk: list[tuple[int, str]]) -> None:
        for i, image in chunk:
            target = f"local/team{i % NAMESPACES}/Deployment/{workload_name(image)}/app"
            assert store.targets.claim(target, image, digest, now, Trigger.RECONCILE, now)
            assert store.targets.finish(target, digest, TargetStatus.APPLIED, now, trigger=Trigger.RECONCILE)

    work = list(enumerate(tags))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(seed, [work[i : i + 200] for i in range(0, len(work), 200)]))


def seed_index(stack: Any, tags: list[str], digest: str) -> None:
    """The index entries and tag states the first reconcile writes, through the real state repositories."""
    from tagpin.adapters.dynamodb import dynamodb_state
    from tagpin.domain.messages import Trigger
    from tagpin.ports.state import IndexEntry

    store = dynamodb_state(stack.client("dynamodb"), "tagpin-state")
    now = time.time_ns() // 1_000_000
    entries = [
        IndexEntry(
            image=image,
            target_id=f"local/team{i % NAMESPACES}/Deployment/{workload_name(image)}/app",
            cluster="local",
            namespace=f"team{i % NAMESPACES}",
            kind="Deployment",
            name=workload_name(image),
            container="app",
            seen_at=now,
        )
        for i, image in enumerate(tags)
    ]
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda part: store.index.update(part, []),
                [entries[i : i + 500] for i in range(0, len(entries), 500)],
            )
        )
        list(pool.map(lambda image: store.tags.record(image, digest, now, Trigger.RECONCILE), tags))


def table_bytes(stack: Any) -> dict[str, int]:
    db = stack.client("dynamodb")
    sizes: dict[str, int] = {}
    for table in ("tagpin-state", "tagpin-idempotency"):
        total = 0
        for page in db.get_paginator("scan").paginate(TableName=table):
            total += sum(item_size(i) + 100 for i in page["Items"])  # + 100 B per item: DynamoDB overhead
        sizes[table] = total
    return sizes


def explicit_config_bytes(host: str, n: int) -> int:
    """Size of the configuration listing the same N targets explicitly (no labels)."""
    document = {
        "clusters": {"local": {"kubeconfig": {"secret": "tagpin/clusters/local", "context": "local"}}},
        "registries": {host: {"insecure": True}},
        "images": [
            {
                "image": image,
                "targets": [
                    {
                        "cluster": "local",
                        "namespace": f"team{i % NAMESPACES}",
                        "kind": "Deployment",
                        "name": workload_name(image),
                        "container": "app",
                    }
                ],
            }
            for i, image in enumerate(images(host, n))
        ],
    }
    return len(yaml.safe_dump(document, sort_keys=False).encode())


def distribution_notification(host: str, image: str, digest: str) -> bytes:
    repository, tag = image.removeprefix(host + "/").rsplit(":", 1)
    event = {
        "id": f"cost-{time.time_ns()}",
        "timestamp": "2026-01-01T00:00:00Z",
        "action": "push",
        "target": {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest,
            "repository": repository,
            "tag": tag,
        },
        "request": {"host": host, "method": "PUT"},
    }
    return json.dumps({"events": [event]}).encode()


# --- one size ------------------------------------------------------------------------------------


def measure_size(n: int, args: argparse.Namespace, calls: AwsCalls, logs: LogBytes) -> dict[str, Any]:
    from tagpin_local.faultproxy import FaultProxy
    from tagpin_local.kubesim import deployment
    from tagpin_local.lambda_runtime import sqs_event
    from tagpin_local.oci import push_image
    from tagpin_local.stack import LocalStack, StackOptions, cluster_secret

    out: dict[str, Any] = {"n": n}
    timings: dict[str, float] = {}
    options = StackOptions(notifications=False, consume=False, log_level="INFO")
    with LocalStack(options) as stack, FaultProxy(stack.registry.url) as proxy:  # type: ignore[union-attr]
        assert stack.registry is not None
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"  # EMF blobs counted in the log bytes
        for name in ["tagpin", *logging.root.manager.loggerDict]:
            if name == "tagpin" or name.startswith("tagpin."):
                for handler in logging.getLogger(name).handlers:
                    if isinstance(handler, logging.StreamHandler):
                        handler.setStream(logs)
        host = proxy.host
        tags = images(host, n)
        # checks queue for the verifier (when the consumer sends rollout checks)
        sqs = stack.client("sqs")
        verification_url = sqs.create_queue(QueueName="tagpin-verifications")["QueueUrl"]
        verification_arn = sqs.get_queue_attributes(QueueUrl=verification_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        os.environ["TAGPIN_VERIFICATION_QUEUE_URL"] = verification_url
        document = {
            "clusters": {"local": {"kubeconfig": {"secret": cluster_secret("local"), "context": "local"}}},
            "registries": {host: {"insecure": True}, stack.registry.host: {"insecure": True}},
            "images": [],
        }
        stack.write_config(document)
        config_text = yaml.safe_dump(document, sort_keys=False)
        explicit = explicit_config_bytes(host, n)
        try:  # does moto enforce the SSM size limits (4 KB standard, 8 KB advanced)?
            stack.client("ssm").put_parameter(
                Name="/tagpin/explicit-probe", Value="x" * explicit, Type="String", Tier="Standard"
            )
            moto_accepts = True
        except Exception:
            moto_accepts = False
        out["config"] = {
            "labels_config_bytes": len(config_text.encode()),
            "explicit_config_bytes": explicit,
            "explicit_fits_standard_4kb": explicit <= 4096,
            "explicit_fits_advanced_8kb": explicit <= 8192,
            "moto_accepts_explicit_as_standard": moto_accepts,
        }

        t0 = time.perf_counter()
        digest = push_tags(stack.registry.url, n)
        timings["push_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i, image in enumerate(tags):
            stack.kube.create(
                deployment(
                    workload_name(image),
                    f"team{i % NAMESPACES}",
                    f"{image}@{digest}",
                    container="app",
                    replicas=1,
                    labels=FOLLOW,
                )
            )
        timings["workloads_s"] = time.perf_counter() - t0
        meter = Meter(stack, proxy, calls, logs)

        # the targets' states first (so discovery finds nothing behind and enqueues nothing), then
        # discovery: the first reconcile (the real path) where its run is measured, else the index
        # and the tags' states written through the same repository calls it makes
        t0 = time.perf_counter()
        seed_target_states(stack, tags, digest)
        timings["seed_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if n <= args.reconcile_max:
            with meter.measure("first reconcile (discovery)") as first:
                report = stack.run_reconciler()
            assert report["targets"] == n and report["enqueued"] == 0, report
            out["first_reconcile"] = first.as_dict()
            timings["first_reconcile_s"] = time.perf_counter() - t0
        else:
            seed_index(stack, tags, digest)
            timings["seed_index_s"] = time.perf_counter() - t0

        # (a) steady-state poll
        polls = []
        for _ in range(args.poll_runs if n <= 1000 else max(1, args.poll_runs - 1)):
            with meter.measure("steady poll") as poll:
                summary = stack.run_poller()
            assert summary["unchanged"] == n and summary["enqueued"] == 0, summary
            polls.append(poll)
        out["steady_poll"] = polls[-1].as_dict()
        out["steady_poll"]["duration_ms"] = [round(p.duration_ms[0], 1) for p in polls]

        # (b) one change through the poll, then the consumer
        changed_digest = push_image(stack.registry.url, "bench/r000", "t000")
        with meter.measure("poll with one change") as poll_change:
            summary = stack.run_poller()
        assert summary["changed"] == 1 and summary["enqueued"] == 1, summary
        out["poll_one_change"] = poll_change.as_dict()

        def consume(label: str) -> Measured:
            with meter.measure(label) as consumed:
                assert stack.consume_once(wait_s=2) == 1
            assert "image" in str(stack.kube.get("Deployment", "team0", "r000-t000"))
            return consumed

        out["consumer_one_change"] = consume("consumer, one change").as_dict()
        deployment_image = stack.kube.get("Deployment", "team0", "r000-t000")["spec"]["template"]["spec"][
            "containers"
        ][0]["image"]
        assert deployment_image.endswith(changed_digest), deployment_image
        out["verifier_one_change"] = run_verifications(
            stack, meter, sqs, verification_url, verification_arn, sqs_event
        )

        # (b') one change through a registry notification (the webhook), then the consumer
        second = tags[1] if n > 1 else tags[0]
        repository, tag = second.removeprefix(host + "/").rsplit(":", 1)
        webhook_digest = push_image(stack.registry.url, repository, tag)
        with meter.measure("webhook, one change") as hook:
            answer = httpx.post(
                stack.webhook_url + "/distribution",
                content=distribution_notification(host, second, webhook_digest),
                headers={
                    "authorization": f"Bearer {stack.webhook_token}",
                    "content-type": "application/vnd.docker.distribution.events.v1+json",
                },
                timeout=60,
            )
        assert answer.status_code == 202, answer.text
        out["webhook_one_change"] = hook.as_dict()
        out["consumer_webhook_change"] = consume("consumer, webhook change").as_dict()
        run_verifications(stack, meter, sqs, verification_url, verification_arn, sqs_event)

        # (c) steady-state reconcile
        if n <= args.reconcile_max:
            t0 = time.perf_counter()
            with meter.measure("steady reconcile") as reconcile:
                report = stack.run_reconciler()
            timings["steady_reconcile_s"] = time.perf_counter() - t0
            assert report["targets"] == n and report["enqueued"] == 0, report
            out["steady_reconcile"] = reconcile.as_dict()
        out["table_bytes"] = table_bytes(stack)
    out["setup_seconds"] = {k: round(v, 1) for k, v in timings.items()}
    return out


def run_verifications(
    stack: Any, meter: Meter, sqs: Any, url: str, arn: str, sqs_event: Callable[..., dict[str, Any]]
) -> dict[str, Any] | None:
    """Run the verifier on the rollout checks the consumer queued (delayed messages), as Lambda's
    event source would; None when the consumer queued none."""
    from tagpin_local.lambda_runtime import LocalFunction

    verifier = stack.functions.get("verifier")
    if verifier is None:
        try:
            verifier = stack.functions["verifier"] = LocalFunction("verifier", timeout_s=60)
        except Exception:  # no verifier function in this tree
            return None
        meter.wrap("verifier", verifier)
    total: Measured | None = None
    deadline = time.monotonic() + 90
    with meter.measure("verifier") as measured:
        while time.monotonic() < deadline:
            attributes = sqs.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
            )["Attributes"]
            if (
                attributes["ApproximateNumberOfMessages"] == "0"
                and attributes["ApproximateNumberOfMessagesDelayed"] == "0"
            ):
                break
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2).get(
                "Messages", []
            )
            if not messages:
                continue
            response = verifier.invoke(sqs_event(messages, arn)) or {}
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
            done = [m for m in messages if m["MessageId"] not in failed]
            if done:
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
                )
        total = measured
    if total is None or total.invocations == 0:
        return None
    # the receive loop above waits for delayed messages: only the calls Lambda's poller would make
    # for the messages it delivered are kept (one receive per batch, one delete batch)
    result = total.as_dict()
    calls = result["aws_calls"]
    calls["sqs:ReceiveMessage"] = total.invocations
    calls.pop("sqs:GetQueueAttributes", None)
    return result


# --- the monthly estimate ------------------------------------------------------------------------


def lambda_cost(duration_ms: float, memory_mb: int) -> float:
    return (
        math.ceil(duration_ms) / 1000 * memory_mb / 1024 * PRICES["lambda_gb_second"]
        + PRICES["lambda_request"]
    )


def dynamodb_cost(m: dict[str, Any]) -> float:
    return (
        float(m["dynamodb_rru"]) * PRICES["dynamodb_rru"] + float(m["dynamodb_wru"]) * PRICES["dynamodb_wru"]
    )


def sqs_requests(m: dict[str, Any], fifo: bool = True) -> float:
    return float(
        sum(v for k, v in m["aws_calls"].items() if k.startswith("sqs:") and k != "sqs:GetQueueAttributes")
    )


def secrets_calls(m: dict[str, Any]) -> int:
    return sum(v for k, v in m["aws_calls"].items() if k.startswith("secretsmanager:"))


@dataclass
class Bill:
    lines: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))
    usage: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))

    def run(
        self, label: str, m: dict[str, Any], memory_mb: int, per_month: float, ms: float | None = None
    ) -> None:
        """``per_month`` executions of a measured operation (one function invocation each unless
        the measurement had several)."""
        invocations = sum(m["invocations"].values()) or 1
        duration = statistics.median(m["duration_ms"]) if ms is None and m["duration_ms"] else (ms or 0.0)
        self.lines[f"{label}: Lambda"] += per_month * (
            invocations * lambda_cost(duration / invocations, memory_mb)
        )
        self.usage["lambda_requests"] += per_month * invocations
        self.usage["lambda_gb_seconds"] += per_month * duration / 1000 * memory_mb / 1024
        self.lines[f"{label}: DynamoDB"] += per_month * dynamodb_cost(m)
        requests = sqs_requests(m)
        self.lines[f"{label}: SQS"] += per_month * requests * PRICES["sqs_fifo_request"]
        self.usage["sqs_requests"] += per_month * requests
        self.lines[f"{label}: Secrets Manager calls"] += (
            per_month * secrets_calls(m) * PRICES["secrets_manager_api_call"]
        )
        self.lines[f"{label}: CloudWatch Logs"] += (
            per_month * m["log_bytes"] / 1e9 * PRICES["cloudwatch_logs_ingest_gb"]
        )
        self.usage["cloudwatch_logs_gb"] += per_month * m["log_bytes"] / 1e9
        self.lines[f"{label}: X-Ray"] += per_month * invocations * PRICES["xray_trace_recorded"]
        publishes = m["aws_calls"].get("sns:Publish", 0)
        self.lines[f"{label}: SNS"] += per_month * publishes * PRICES["sns_publish"]
        self.usage["xray_traces"] += per_month * invocations

    def total(self) -> float:
        return sum(self.lines.values())


def estimate(
    row: dict[str, Any], defaults: dict[str, Any], args: argparse.Namespace, metrics: int
) -> dict[str, Any]:
    n = row["n"]
    memory = defaults["memory_mb"]
    minutes = HOURS_PER_MONTH * 60
    polls = minutes / rate_minutes(defaults["poll_schedule"])
    reconciles = minutes / rate_minutes(defaults["reconcile_schedule"])
    changes = args.changes_per_1000_per_day * n / 1000 * HOURS_PER_MONTH / 24
    bill = Bill()
    bill.run("poll (steady)", row["steady_poll"], memory["poller"], polls)
    # detection in the poll: what a run with one change costs over a steady one (DynamoDB, SQS)
    extra = {
        "invocations": {},
        "duration_ms": [],
        "aws_calls": {
            k: max(0, v - row["steady_poll"]["aws_calls"].get(k, 0))
            for k, v in row["poll_one_change"]["aws_calls"].items()
        },
        "dynamodb_rru": max(0.0, row["poll_one_change"]["dynamodb_rru"] - row["steady_poll"]["dynamodb_rru"]),
        "dynamodb_wru": max(0.0, row["poll_one_change"]["dynamodb_wru"] - row["steady_poll"]["dynamodb_wru"]),
        "log_bytes": max(0, row["poll_one_change"]["log_bytes"] - row["steady_poll"]["log_bytes"]),
    }
    per_change = Bill()
    per_change.run("change", extra, memory["poller"], 1, ms=0.0)
    per_change.lines["change: Lambda"] = 0.0
    per_change.lines["change: X-Ray"] = 0.0
    per_change.run("change consumer", row["consumer_one_change"], memory["consumer"], 1)
    if row.get("verifier_one_change"):
        per_change.run("change verifier", row["verifier_one_change"], memory.get("verifier", 256), 1)
    for key, value in per_change.lines.items():
        bill.lines["changes: " + key.split(": ", 1)[1]] += value * changes
    bill.usage["lambda_requests"] += changes * (1 + int(bool(row.get("verifier_one_change"))))
    steady_reconcile = row.get("steady_reconcile")
    reconcile_extrapolated = steady_reconcile is None
    if steady_reconcile is None:  # linear in the tags: scale the largest measured run
        steady_reconcile = scale(row["reconcile_basis"], n / row["reconcile_basis_n"])
    bill.run("reconcile (steady)", steady_reconcile, memory["reconciler"], reconciles)
    # fixed
    bill.lines["fixed: CloudWatch alarms"] = defaults["alarms"] * PRICES["cloudwatch_alarm_month"]
    bill.lines["fixed: CloudWatch custom metrics"] = metrics * PRICES["cloudwatch_metric_month"]
    secrets = 1 + args.clusters + args.registries_with_credentials  # webhook + kubeconfigs + registries
    bill.lines["fixed: Secrets Manager secrets"] = secrets * PRICES["secrets_manager_secret_month"]
    # registry credentials: the poller reads each secret at most every 5 minutes per warm container
    bill.lines["fixed: Secrets Manager calls (registry credentials)"] = (
        args.registries_with_credentials * (polls + reconciles) * PRICES["secrets_manager_api_call"]
    )
    # Lambda's SQS event source long-polls each consumed queue even when idle (not measured here)
    queues = 1 + int(bool(row.get("verifier_one_change")))
    idle = queues * args.esm_receives_per_minute * minutes
    bill.lines["fixed: SQS event source idle polling (assumed)"] = idle * PRICES["sqs_fifo_request"]
    bill.usage["sqs_requests"] += idle
    gb = sum(row["table_bytes"].values()) / 1e9
    bill.lines["fixed: DynamoDB storage + PITR"] = gb * (
        PRICES["dynamodb_storage_gb_month"] + PRICES["dynamodb_pitr_gb_month"]
    )
    logs_gb = bill.usage["cloudwatch_logs_gb"]
    bill.lines["fixed: CloudWatch Logs storage"] = (
        logs_gb * defaults["log_retention_days"] / 30 * PRICES["cloudwatch_logs_storage_gb_month"]
    )
    total = bill.total()
    webhook_change = Bill()
    webhook_change.run("webhook", row["webhook_one_change"], memory["webhook"], 1)
    webhook_change.lines["webhook: HTTP API"] = PRICES["http_api_request"]
    return {
        "n": n,
        "polls_per_month": round(polls),
        "reconciles_per_month": round(reconciles),
        "changes_per_month": round(changes),
        "reconcile_extrapolated": reconcile_extrapolated,
        "lines": {k: round(v, 4) for k, v in sorted(bill.lines.items())},
        "by_part": by_part(bill.lines),
        "total_usd_month": round(total, 2),
        "after_free_tier_usd_month": round(after_free_tier(bill, total), 2),
        "per_change_usd": round(per_change.total(), 7),
        "per_webhook_detection_usd": round(webhook_change.total(), 7),
        "usage": {k: round(v, 3) for k, v in bill.usage.items()},
    }


def scale(m: dict[str, Any], factor: float) -> dict[str, Any]:
    return {
        **m,
        "duration_ms": [d * factor for d in m["duration_ms"]],
        "aws_calls": {k: round(v * factor) for k, v in m["aws_calls"].items()},
        "dynamodb_rru": m["dynamodb_rru"] * factor,
        "dynamodb_wru": m["dynamodb_wru"] * factor,
        "log_bytes": round(m["log_bytes"] * factor),
    }


def by_part(lines: dict[str, float]) -> dict[str, float]:
    parts: dict[str, float] = collections.defaultdict(float)
    for key, value in lines.items():
        parts[key.split(": ", 1)[0]] += value
    return {k: round(v, 2) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])}


def after_free_tier(bill: Bill, total: float) -> float:
    """The total with the always-free allowances subtracted (if nothing else in the account uses them)."""
    u = bill.usage
    saved = min(u["lambda_requests"], FREE_TIER["lambda_requests"]) * PRICES["lambda_request"]
    saved += min(u["lambda_gb_seconds"], FREE_TIER["lambda_gb_seconds"]) * PRICES["lambda_gb_second"]
    saved += min(u["sqs_requests"], FREE_TIER["sqs_requests"]) * PRICES["sqs_fifo_request"]
    saved += (
        min(u["cloudwatch_logs_gb"], FREE_TIER["cloudwatch_logs_gb"]) * PRICES["cloudwatch_logs_ingest_gb"]
    )
    saved += min(u["xray_traces"], FREE_TIER["xray_traces"]) * PRICES["xray_trace_recorded"]
    saved += min(
        bill.lines["fixed: CloudWatch alarms"],
        FREE_TIER["cloudwatch_alarms"] * PRICES["cloudwatch_alarm_month"],
    )
    saved += min(
        bill.lines["fixed: CloudWatch custom metrics"],
        FREE_TIER["cloudwatch_metrics"] * PRICES["cloudwatch_metric_month"],
    )
    saved += bill.lines["fixed: DynamoDB storage + PITR"] * 0  # storage free up to 25 GB, PITR is not
    return max(0.0, total - saved)


# --- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument(
        "--changes-per-1000-per-day",
        type=float,
        default=20.0,
        help="assumed tag moves per day per 1,000 followed tags (each applied to one target)",
    )
    parser.add_argument(
        "--reconcile-max",
        type=int,
        default=1000,
        help="largest N whose reconcile runs are measured; larger ones are scaled linearly from it "
        "(on 2 cores a reconcile against moto takes about 21 ms per tag)",
    )
    parser.add_argument("--poll-runs", type=int, default=3, help="steady polls measured per size")
    parser.add_argument("--clusters", type=int, default=1, help="clusters (one kubeconfig secret each)")
    parser.add_argument("--registries-with-credentials", type=int, default=0)
    parser.add_argument(
        "--esm-receives-per-minute",
        type=float,
        default=15.0,
        help="assumed idle ReceiveMessage calls per minute by Lambda's SQS event source, per queue",
    )
    parser.add_argument(
        "--from-results", action="store_true", help="recompute the estimate from bench/results/cost.json"
    )
    args = parser.parse_args()
    if args.from_results:
        doc = json.loads(RESULTS.read_text())
        write(doc, doc["measured"], args, set(doc["custom_metrics_seen"]), doc["seconds"])
        return
    for key, value in {"AWS_EC2_METADATA_DISABLED": "true"}.items():
        os.environ.setdefault(key, value)
    logging.getLogger("tagpin.local").setLevel(logging.ERROR)

    calls = AwsCalls()
    calls.install()
    logs = LogBytes()
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(logs):
            for n in (int(s) for s in args.sizes.split(",")):
                t0 = time.perf_counter()
                row = measure_size(n, args, calls, logs)
                row["seconds"] = round(time.perf_counter() - t0, 1)
                rows.append(row)
                print(
                    f"N={n}: measured in {row['seconds']}s {row['setup_seconds']}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        calls.uninstall()
    write({}, rows, args, logs.metrics, round(time.perf_counter() - started, 1))


def write(
    previous: dict[str, Any],
    rows: list[dict[str, Any]],
    args: argparse.Namespace,
    seen: set[str],
    seconds: float,
) -> None:
    defaults = template_defaults()
    basis = max((r for r in rows if "steady_reconcile" in r), key=lambda r: r["n"], default=None)
    for row in rows:
        if "steady_reconcile" not in row:
            if basis is None:
                raise SystemExit("no steady reconcile was measured (raise --reconcile-max)")
            row["reconcile_basis"] = basis["steady_reconcile"]
            row["reconcile_basis_n"] = basis["n"]
    metrics = len(seen)
    estimates = [estimate(row, defaults, args, metrics) for row in rows]
    for row in rows:
        row.pop("reconcile_basis", None)
    doc = {
        "what": "monthly cost of tagpin at the template's defaults, from API calls measured per operation",
        "machine": previous.get("machine")
        or {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "seconds": seconds,
        "defaults": defaults,
        "assumptions": {
            "changes_per_1000_tags_per_day": args.changes_per_1000_per_day,
            "targets_per_tag": 1,
            "clusters": args.clusters,
            "registries_with_credentials": args.registries_with_credentials,
            "sqs_event_source_idle_receives_per_minute_per_queue": args.esm_receives_per_minute,
            "detection": "by the poll (the webhook path is priced per change separately)",
            "hours_per_month": HOURS_PER_MONTH,
            "lambda_duration": "handler wall time against moto on this machine: pessimistic",
        },
        "price_date": PRICE_DATE,
        "prices_usd": PRICES,
        "free_tier": FREE_TIER,
        "custom_metrics_seen": sorted(seen),
        "measured": rows,
        "estimate": estimates,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    print_table(doc)


def print_table(doc: dict[str, Any]) -> None:
    print(
        f"tagpin monthly cost at the defaults ({doc['defaults']['poll_schedule']} poll, "
        f"{doc['defaults']['reconcile_schedule']} reconcile), us-east-1 list prices of {doc['price_date']}"
    )
    print(f"{'':<34}" + "".join(f"{'N=' + format(r['n'], ','):>14}" for r in doc["measured"]))

    def line(label: str, values: list[Any], fmt: str = "{:>14}") -> None:
        print(f"{label:<34}" + "".join(fmt.format(v) for v in values))

    rows, ests = doc["measured"], doc["estimate"]
    line(
        "steady poll: ms (median)",
        [f"{statistics.median(r['steady_poll']['duration_ms']):.0f}" for r in rows],
    )
    line("steady poll: AWS calls", [sum(r["steady_poll"]["aws_calls"].values()) for r in rows])
    line(
        "steady poll: RRU / WRU",
        [f"{r['steady_poll']['dynamodb_rru']:.0f}/{r['steady_poll']['dynamodb_wru']:.0f}" for r in rows],
    )
    line(
        "steady poll: registry requests", [sum(r["steady_poll"]["registry_requests"].values()) for r in rows]
    )
    line("consumer, one change: ms", [f"{r['consumer_one_change']['duration_ms'][0]:.0f}" for r in rows])
    line(
        "consumer, one change: AWS calls", [sum(r["consumer_one_change"]["aws_calls"].values()) for r in rows]
    )
    line("webhook, one change: AWS calls", [sum(r["webhook_one_change"]["aws_calls"].values()) for r in rows])
    line(
        "steady reconcile: ms",
        [
            f"{r['steady_reconcile']['duration_ms'][0]:.0f}" if "steady_reconcile" in r else "extrap."
            for r in rows
        ],
    )
    line(
        "steady reconcile: RRU / WRU",
        [
            f"{r['steady_reconcile']['dynamodb_rru']:.0f}/{r['steady_reconcile']['dynamodb_wru']:.0f}"
            if "steady_reconcile" in r
            else "extrap."
            for r in rows
        ],
    )
    print()
    parts = list(dict.fromkeys(p for e in ests for p in e["by_part"]))
    for part in parts:
        line(f"$/month {part}", [f"{e['by_part'].get(part, 0):.2f}" for e in ests])
    line("$/month TOTAL (list prices)", [f"{e['total_usd_month']:.2f}" for e in ests])
    line("$/month after always-free tier", [f"{e['after_free_tier_usd_month']:.2f}" for e in ests])
    line("$ per change (poll-detected)", [f"{e['per_change_usd']:.6f}" for e in ests])
    print(f"written to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
