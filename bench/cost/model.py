"""Price: the monthly model.

The monthly cost is computed from the measured figures at the template's defaults (read from
template.yaml: schedules, memory sizes, alarm count; ``defaults.py``) and the price table
(``prices.py``).
"""

from __future__ import annotations

import argparse
import collections
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from .defaults import rate_minutes
from .prices import FREE_TIER, HOURS_PER_MONTH, PRICES, sqs_request_price


def gb_second_price(architecture: str) -> float:
    """Lambda's price per GB-s for the functions' architecture (template.yaml, Globals)."""
    return PRICES["lambda_gb_second_arm64" if architecture == "arm64" else "lambda_gb_second"]


def lambda_cost(duration_ms: float, memory_mb: int, architecture: str = "x86_64") -> float:
    return (
        math.ceil(duration_ms) / 1000 * memory_mb / 1024 * gb_second_price(architecture)
        + PRICES["lambda_request"]
    )


# Lambda's billed duration, modelled from what was measured (``cpu.py``): the function's own CPU
# time, stretched by the CPU share Lambda gives the memory size (a full vCPU at 1,769 MB,
# proportionally less below), plus the waits on the network, each call one assumed round trip,
# one after another (pessimistic: the poll overlaps its reads and its registry requests).
FULL_VCPU_MB = 1769
AWS_CALL_MS = 10.0  # one AWS API call in-region (DynamoDB answers in single-digit ms)
KUBERNETES_CALL_MS = 20.0  # one Kubernetes API request (a LIST page of 500 workloads included)
REGISTRY_MS = 50.0  # one registry round trip (HEAD of a manifest) over the internet
REGISTRY_CONCURRENCY = 32  # the registry client's per-registry bound (adapters/registry/client.py)


def lambda_ms(
    cpu_ms: float,
    memory_mb: int,
    *,
    aws_calls: float = 0,
    kubernetes_requests: float = 0,
    registry_requests: float = 0,
) -> float:
    """Modelled duration of one invocation from its own CPU and its round trips (above)."""
    return (
        cpu_ms * max(1.0, FULL_VCPU_MB / memory_mb)
        + aws_calls * AWS_CALL_MS
        + kubernetes_requests * KUBERNETES_CALL_MS
        + math.ceil(registry_requests / REGISTRY_CONCURRENCY) * REGISTRY_MS
    )


def billed_ms(m: dict[str, Any], memory_mb: int) -> float | None:
    """Modelled duration of one invocation of a measurement (None when no CPU was measured)."""
    if not m.get("cpu_ms"):
        return None
    invocations = max(1, len(m["duration_ms"]))
    return lambda_ms(
        float(statistics.median(m["cpu_ms"])),
        memory_mb,
        aws_calls=sum(m["aws_calls"].values()) / invocations,
        kubernetes_requests=sum(m.get("kubernetes_requests", {}).values()) / invocations,
        registry_requests=sum(m.get("registry_requests", {}).values()) / invocations,
    )


def dynamodb_cost(m: dict[str, Any]) -> float:
    return (
        float(m["dynamodb_rru"]) * PRICES["dynamodb_rru"] + float(m["dynamodb_wru"]) * PRICES["dynamodb_wru"]
    )


# what only the bench calls (its waits for the queues to drain), not the functions: not priced
BENCH_ONLY_SQS = frozenset({"GetQueueAttributes"})


def sqs_requests(m: dict[str, Any]) -> float:
    return sum(sqs_requests_by_type(m).values())


def sqs_requests_by_type(m: dict[str, Any]) -> dict[str, float]:
    """A measurement's billed SQS requests by the type of the queue each went to (``fifo``,
    ``standard``): from ``sqs_requests`` (queue -> operation -> requests, a 64 KB chunk of payload
    one request; a FIFO queue's name ends in ``.fifo``). Results recorded before the calls were
    told apart by queue have only ``aws_calls``: their requests are all counted FIFO (the dearer;
    overstated, as they were priced then)."""
    by_queue = m.get("sqs_requests")
    if by_queue is None:
        calls = sum(
            v for k, v in m["aws_calls"].items() if k.startswith("sqs:") and k[4:] not in BENCH_ONLY_SQS
        )
        return {"fifo": float(calls), "standard": 0.0}
    found = {"fifo": 0.0, "standard": 0.0}
    for queue, operations in by_queue.items():
        kind = "fifo" if queue.endswith(".fifo") else "standard"
        found[kind] += sum(v for op, v in operations.items() if op not in BENCH_ONLY_SQS)
    return found


def sqs_difference(more: dict[str, Any], less: dict[str, Any]) -> dict[str, dict[str, int]] | None:
    """The SQS requests by queue and operation that ``more`` made over ``less`` (None when either
    measurement did not record them by queue)."""
    if "sqs_requests" not in more or "sqs_requests" not in less:
        return None
    return {
        queue: {op: max(0, v - less["sqs_requests"].get(queue, {}).get(op, 0)) for op, v in ops.items()}
        for queue, ops in more["sqs_requests"].items()
    }


def secrets_calls(m: dict[str, Any]) -> int:
    """Secret reads of a measurement made with Secrets Manager (``GetSecretValue``). A measurement
    made with SSM (the local stack's default) counts them among ``ssm:GetParameter`` with the
    configuration's reads: free at standard throughput, so not priced apart."""
    return sum(v for k, v in m["aws_calls"].items() if k.startswith("secretsmanager:"))


@dataclass(frozen=True)
class SecretPrices:
    """What the secrets cost in the stack's store (template parameter SecretStore)."""

    store: str
    per_secret_month: float
    per_read: float

    @property
    def label(self) -> str:
        return "SSM SecureString" if self.store == "ssm" else "Secrets Manager"


def secret_prices(store: str) -> SecretPrices:
    """SSM Standard-tier SecureString parameters: no monthly charge, reads free at standard
    throughput; Secrets Manager: $0.40 per secret a month and $0.05 per 10,000 reads."""
    if store == "ssm":
        return SecretPrices(store, PRICES["ssm_standard_parameter_month"], PRICES["ssm_standard_api_call"])
    return SecretPrices(store, PRICES["secrets_manager_secret_month"], PRICES["secrets_manager_api_call"])


@dataclass
class Bill:
    lines: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))
    usage: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))
    secrets: SecretPrices = field(default_factory=lambda: secret_prices("ssm"))
    architecture: str = "x86_64"
    traced: bool = True  # X-Ray (template Globals Tracing: Active): one trace per invocation

    def run(
        self,
        label: str,
        m: dict[str, Any],
        memory_mb: int,
        per_month: float,
        ms: float | None = None,
        *,
        invoked: bool = True,
    ) -> None:
        """``per_month`` executions of a measured operation (one function invocation each unless
        the measurement had several; none when not ``invoked``: calls made inside an invocation
        priced elsewhere, as a poll's extra calls for a change)."""
        invocations = (sum(m["invocations"].values()) or 1) if invoked else 0
        if invoked:
            modelled = billed_ms(m, memory_mb) if ms is None else None
            if modelled is not None:
                duration = modelled * invocations
            else:
                duration = (
                    statistics.median(m["duration_ms"]) if ms is None and m["duration_ms"] else (ms or 0.0)
                )
            self.lines[f"{label}: Lambda"] += per_month * (
                invocations * lambda_cost(duration / invocations, memory_mb, self.architecture)
            )
            self.usage["lambda_requests"] += per_month * invocations
            self.usage["lambda_gb_seconds"] += per_month * duration / 1000 * memory_mb / 1024
        self.lines[f"{label}: DynamoDB"] += per_month * dynamodb_cost(m)
        # each request at its queue's price (the changes queue FIFO, the notifications queue standard)
        by_type = sqs_requests_by_type(m)
        self.lines[f"{label}: SQS"] += per_month * sum(
            requests * sqs_request_price(kind == "fifo") for kind, requests in by_type.items()
        )
        self.usage["sqs_requests"] += per_month * sum(by_type.values())
        self.usage["sqs_requests_standard"] += per_month * by_type["standard"]
        self.lines[f"{label}: secret reads ({self.secrets.label})"] += (
            per_month * secrets_calls(m) * self.secrets.per_read
        )
        self.lines[f"{label}: CloudWatch Logs"] += (
            per_month * m["log_bytes"] / 1e9 * PRICES["cloudwatch_logs_ingest_gb"]
        )
        self.usage["cloudwatch_logs_gb"] += per_month * m["log_bytes"] / 1e9
        if self.traced:
            self.lines[f"{label}: X-Ray"] += per_month * invocations * PRICES["xray_trace_recorded"]
        publishes = m["aws_calls"].get("sns:Publish", 0)
        self.lines[f"{label}: SNS"] += per_month * publishes * PRICES["sns_publish"]
        self.usage["sns_publishes"] += per_month * publishes
        self.usage["xray_traces"] += per_month * invocations * self.traced

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
    store = secret_prices(getattr(args, "secret_store", None) or defaults.get("secret_store", "ssm"))
    architecture = defaults.get("architecture", "x86_64")
    traced = defaults.get("tracing", "Active") == "Active"
    bill = Bill(secrets=store, architecture=architecture, traced=traced)
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
    sqs_extra = sqs_difference(row["poll_one_change"], row["steady_poll"])
    if sqs_extra is not None:
        extra["sqs_requests"] = sqs_extra
    per_change = Bill(secrets=store, architecture=architecture, traced=traced)
    per_change.run("change", extra, memory["poller"], 1, invoked=False)  # inside the poll's invocation
    per_change.run("change consumer", row["consumer_one_change"], memory["consumer"], 1)
    # a rollout verification: the consumer again (before it is due and when it is due); measured
    # apart by older runs, when a verifier function read a queue of its own
    verification = row.get("verification_one_change") or row.get("verifier_one_change")
    if verification:
        per_change.run("change verification", verification, memory.get("verifier", memory["consumer"]), 1)
    for key, value in per_change.lines.items():
        bill.lines["changes: " + key.split(": ", 1)[1]] += value * changes
    for key, value in per_change.usage.items():  # what the changes use, against the free tier too
        bill.usage[key] += value * changes
    steady_reconcile = row.get("steady_reconcile")
    reconcile_extrapolated = steady_reconcile is None
    if steady_reconcile is None:  # linear in the tags: scale the largest measured run
        steady_reconcile = scale(row["reconcile_basis"], n / row["reconcile_basis_n"])
    bill.run("reconcile (steady)", steady_reconcile, memory["reconciler"], reconciles)
    # fixed
    bill.lines["fixed: CloudWatch alarms"] = defaults["alarms"] * PRICES["cloudwatch_alarm_month"]
    bill.lines["fixed: CloudWatch custom metrics"] = metrics * PRICES["cloudwatch_metric_month"]
    # webhook + kubeconfigs + registries, in the stack's store: with SSM (the default) each is a
    # Standard-tier SecureString at no monthly charge; with Secrets Manager $0.40 each
    secrets = 1 + args.clusters + args.registries_with_credentials
    bill.lines[f"fixed: secrets ({store.label})"] = secrets * store.per_secret_month
    # registry credentials: the poller reads each secret at most every 5 minutes per warm container
    bill.lines[f"fixed: secret reads ({store.label}, registry credentials)"] = (
        args.registries_with_credentials * (polls + reconciles) * store.per_read
    )
    # Lambda's SQS event source long-polls each consumed queue even when idle (not measured here):
    # the template's queues that an event source reads, each priced by its type (FIFO or standard)
    per_queue = args.esm_receives_per_minute * minutes
    kinds = list(defaults["consumed_queue_types"].values())
    bill.lines["fixed: SQS event source idle polling (assumed)"] = sum(
        per_queue * sqs_request_price(kind == "fifo") for kind in kinds
    )
    bill.usage["sqs_requests"] += per_queue * len(kinds)
    bill.usage["sqs_requests_standard"] += per_queue * kinds.count("standard")
    gb = sum(row["table_bytes"].values()) / 1e9
    bill.usage["dynamodb_storage_gb"] = gb
    bill.lines["fixed: DynamoDB storage + PITR"] = gb * (
        PRICES["dynamodb_storage_gb_month"] + PRICES["dynamodb_pitr_gb_month"]
    )
    logs_gb = bill.usage["cloudwatch_logs_gb"]
    bill.lines["fixed: CloudWatch Logs storage"] = (
        logs_gb * defaults["log_retention_days"] / 30 * PRICES["cloudwatch_logs_storage_gb_month"]
    )
    total = bill.total()
    webhook_change = Bill(secrets=store, architecture=architecture, traced=traced)
    webhook_change.run("webhook", row["webhook_one_change"], memory["webhook"], 1)
    webhook_change.lines["webhook: HTTP API"] = PRICES["http_api_request"]
    return {
        "n": n,
        "secret_store": store.store,
        "polls_per_month": round(polls),
        "reconciles_per_month": round(reconciles),
        "changes_per_month": round(changes),
        "reconcile_extrapolated": reconcile_extrapolated,
        **({"reconcile_basis_from": row.get("reconcile_basis_from")} if reconcile_extrapolated else {}),
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
        "cpu_ms": [c * factor for c in m.get("cpu_ms", [])],
        "registry_requests": {k: round(v * factor) for k, v in m.get("registry_requests", {}).items()},
        "kubernetes_requests": {k: round(v * factor) for k, v in m.get("kubernetes_requests", {}).items()},
        "aws_calls": {k: round(v * factor) for k, v in m["aws_calls"].items()},
        **(
            {
                "sqs_requests": {
                    q: {op: round(v * factor) for op, v in ops.items()}
                    for q, ops in m["sqs_requests"].items()
                }
            }
            if "sqs_requests" in m
            else {}
        ),
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
    saved += min(u["lambda_gb_seconds"], FREE_TIER["lambda_gb_seconds"]) * gb_second_price(bill.architecture)
    # SQS's free requests are shared by both types: counted against the standard ones first (the
    # cheaper: the smaller saving)
    standard = min(u["sqs_requests_standard"], FREE_TIER["sqs_requests"])
    fifo = min(u["sqs_requests"] - u["sqs_requests_standard"], FREE_TIER["sqs_requests"] - standard)
    saved += standard * sqs_request_price(False) + fifo * sqs_request_price(True)
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
    saved += min(u["sns_publishes"], FREE_TIER["sns_publishes"]) * PRICES["sns_publish"]
    # storage free up to 25 GB, its continuous backups (PITR) not
    saved += (
        min(u["dynamodb_storage_gb"], FREE_TIER["dynamodb_storage_gb"]) * PRICES["dynamodb_storage_gb_month"]
    )
    return max(0.0, total - saved)
