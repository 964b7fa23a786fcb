"""Drive: one size N through the real handlers on the local stack, each operation measured.

For N followed tags (one label-discovered target each) the local stack
(``tools/tagpin_local/stack.py``: the real handlers, a moto server, the real CNCF registry behind
a request-counting proxy, a real Kubernetes API server) runs:

  (a) a steady-state scheduled poll (nothing changed), the real poller handler;
  (b) one change end to end: a new digest pushed under one tag, seen by the poll (its extra calls
      over (a) are the detection cost) and, for a second tag, by a registry notification through
      the real webhook handler; each change then applied by the real consumer handler as Lambda's
      SQS event source does (receive, invoke, delete); when the consumer queues a rollout
      verification (on the same queue, due after ``verify_interval_seconds``), the real consumer
      handler runs it too: once before it is due (hidden until then) and once when it is due;
  (c) a steady-state reconcile run, the real reconciler handler.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import yaml

from .awscalls import AwsCalls
from .faults import ServerErrors
from .meter import LogBytes, Measured, Meter
from .world import (
    FOLLOW,
    NAMESPACES,
    distribution_notification,
    explicit_config_bytes,
    images,
    push_tags,
    seed_index,
    seed_target_states,
    table_bytes,
    workload_name,
)

WORKLOAD_WRITERS = 8  # the admin's requests that create the workloads side by side (setup)


def measure_size(
    n: int, args: argparse.Namespace, calls: AwsCalls, logs: LogBytes, errors: ServerErrors | None = None
) -> dict[str, Any]:
    from tagpin_local.faultproxy import FaultProxy
    from tagpin_local.kube.manifests import deployment
    from tagpin_local.oci import push_image
    from tagpin_local.stack import LocalStack, StackOptions, cluster_secret

    out: dict[str, Any] = {"n": n}
    errors = errors or ServerErrors()
    errors_before = errors.mark()
    timings: dict[str, float] = {}
    options = StackOptions(notifications=False, consume=False, check_notifications=False, log_level="INFO")
    t0 = time.perf_counter()
    with LocalStack(options) as stack, FaultProxy(stack.registry.url) as proxy:  # type: ignore[union-attr]
        timings["stack_start_s"] = time.perf_counter() - t0
        assert stack.registry is not None
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"  # EMF blobs counted in the log bytes
        # as the template sets it at its defaults (PollSchedule on): the reconciler uses the digests
        # the poller stored instead of asking the registries for every tag
        os.environ["TAGPIN_RECONCILE_RESOLVES"] = "false"
        for name in ["tagpin", *logging.root.manager.loggerDict]:
            if name == "tagpin" or name.startswith("tagpin."):
                for handler in logging.getLogger(name).handlers:
                    if isinstance(handler, logging.StreamHandler):
                        handler.setStream(logs)
        host = proxy.host
        tags = images(host, n)
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
        # no pods: what is counted is tagpin's calls, which a pinned workload's pods do not change,
        # and 10,000 workloads' pods would fill the local cluster's one node (1,000 pods). The
        # namespaces first, then the workloads side by side (the admin's requests: not counted)
        workloads = [
            deployment(
                workload_name(image),
                f"team{i % NAMESPACES}",
                f"{image}@{digest}",
                container="app",
                replicas=0,
                labels=FOLLOW,
            )
            for i, image in enumerate(tags)
        ]
        for w in workloads[:NAMESPACES]:
            stack.kube.create(w)
        with ThreadPoolExecutor(WORKLOAD_WRITERS) as pool:
            list(pool.map(stack.kube.kube.objects.create, workloads[NAMESPACES:]))
        timings["workloads_s"] = time.perf_counter() - t0
        meter = Meter(stack, proxy, calls, logs, errors)

        # the targets' states first (so discovery finds nothing behind and enqueues nothing), then
        # discovery: the first reconcile (the real path) where its run is measured, else the index
        # and the tags' states written through the same repository calls it makes. Those are
        # written first there (disjoint items, the same table after): the index update's summary of
        # each shard is a Query that moto answers by walking every item of the table, and the
        # 20,000 target items made it slower (at 10,000, moto in process, load 8-10: 33 s, 13 s first)
        cloned: dict[str, bool] = {}
        if n > args.reconcile_max:
            t0 = time.perf_counter()
            cloned["tag states"] = seed_index(stack, tags, digest)
            timings["seed_index_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        cloned["target states"] = seed_target_states(stack, tags, digest)
        timings["seed_s"] = time.perf_counter() - t0
        if n <= args.reconcile_max:
            timings["workloads_observed_s"] = observed(stack, n)  # before the first measured operation
            t0 = time.perf_counter()
            with meter.measure("first reconcile (discovery)") as first:
                report = stack.run_reconciler()
            assert report["targets"] == n and report["enqueued"] == 0, report
            out["first_reconcile"] = first.as_dict()
            timings["first_reconcile_s"] = time.perf_counter() - t0

        # the first polls after discovery settle every tag's digest (a write per tag, once); not
        # the steady state: run until one finished every tag, unmeasured
        t0 = time.perf_counter()
        for _ in range(20):
            if stack.run_poller()["not_reached"] == 0:
                break
        timings["settle_polls_s"] = time.perf_counter() - t0

        # the deployment controller's backlog (the workloads made above) done meanwhile, or now
        timings["workloads_observed_s"] = timings.get("workloads_observed_s", 0.0) + observed(stack, n)

        # (a) steady-state poll
        polls = []
        for _ in range(args.poll_runs if n <= 1000 else max(1, args.poll_runs - 1)):
            with meter.measure("steady poll") as poll:
                summary = stack.run_poller()
            assert summary["unchanged"] == n and summary["enqueued"] == 0, summary
            polls.append(poll)
        out["steady_poll"] = polls[-1].as_dict()
        out["steady_poll"]["duration_ms"] = [round(p.duration_ms[0], 1) for p in polls]
        out["steady_poll"]["cpu_ms"] = [round(p.cpu_ms[0], 1) for p in polls]

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
        t0 = time.perf_counter()
        out["verification_one_change"] = run_verifications(stack, meter)
        timings["verifications_s"] = time.perf_counter() - t0

        # (b') one change through a registry notification (the webhook), then the consumer
        second = tags[1] if n > 1 else tags[0]
        repository, tag = second.removeprefix(host + "/").rsplit(":", 1)
        webhook_digest = push_image(stack.registry.url, repository, tag)
        # Both stages of a notification: the HTTP path queues it (SendMessage) and answers; the
        # webhook's SQS event source receives it, invokes the webhook with it (the check, which
        # enqueues the change) and deletes it: one more invocation and three SQS requests per
        # notification (a burst shares an invocation and a receive per batch of up to 10).
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
            assert stack.check_once(wait_s=2) == 1  # the queued stage, as Lambda's poller runs it
        out["webhook_one_change"] = hook.as_dict()
        out["consumer_webhook_change"] = consume("consumer, webhook change").as_dict()
        t0 = time.perf_counter()
        run_verifications(stack, meter)
        timings["verifications_s"] += time.perf_counter() - t0

        # (c) steady-state reconcile
        if n <= args.reconcile_max:
            t0 = time.perf_counter()
            with meter.measure("steady reconcile") as reconcile:
                report = stack.run_reconciler()
            timings["steady_reconcile_s"] = time.perf_counter() - t0
            assert report["targets"] == n and report["enqueued"] == 0, report
            out["steady_reconcile"] = reconcile.as_dict()
        t0 = time.perf_counter()
        out["table_bytes"] = table_bytes(stack)
        timings["table_bytes_s"] = time.perf_counter() - t0
        stopping = time.perf_counter()
    timings["stack_stop_s"] = time.perf_counter() - stopping
    out["setup_seconds"] = {k: round(v, 1) for k, v in timings.items()}
    out["setup_cloned"] = cloned  # which state was copied (clone.py), not written per tag by the real calls
    # every 5xx/throttling answer of this size, setup included (each measured operation has its own)
    out["aws_server_errors"] = errors.report(errors_before)
    return out


def observed(stack: Any, n: int, timeout_s: float = 1200.0) -> float:
    """Wait until the deployment controller has seen every workload (``observedGeneration``): made
    faster than it handles them, they would otherwise be its backlog while the operations are
    measured (its CPU, and a patched workload's rollout reported late). Returns the seconds waited.
    Read in pages of 500 that stop at the first workload not yet seen: a whole listing of 10,000
    deployments (30 MB) each time would itself keep the API server from the controller's requests."""
    from kubernetes import client

    apps: Any = client.AppsV1Api(stack.kube.kube.api_client())  # raw answers
    started = time.monotonic()

    def all_seen() -> bool:
        after = None
        while True:
            page = json.loads(
                apps.list_deployment_for_all_namespaces(
                    limit=500, _continue=after, _preload_content=False
                ).data
            )
            for i in page["items"]:
                if (i.get("status") or {}).get("observedGeneration", 0) < i["metadata"].get("generation", 1):
                    return False
            after = page["metadata"].get("continue")
            if not after:
                return True

    while not all_seen():
        if time.monotonic() - started > timeout_s:
            print(
                f"setup: the controller had not seen all {n} workloads in {timeout_s:.0f} s", file=sys.stderr
            )
            break
        time.sleep(max(1.0, n / 2000))
    return time.monotonic() - started


def run_verifications(stack: Any, meter: Meter) -> dict[str, Any] | None:
    """Run the consumer on the rollout verifications it queued on the changes queue, as Lambda's
    event source would, until none is left (each delivered before it is due, hidden, then again when
    it is due); None when the consumer queued none."""
    sqs = stack.client("sqs")
    deadline = time.monotonic() + 90
    with meter.measure("consumer, verification") as measured:
        while time.monotonic() < deadline:
            attributes = sqs.get_queue_attributes(
                QueueUrl=stack.queue_url,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"]
            if (
                attributes["ApproximateNumberOfMessages"] == "0"
                and attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
            ):
                break
            stack.consume_once(wait_s=1)
    if measured.invocations == 0:
        return None
    # the receive loop above also waits for hidden messages: only the calls Lambda's poller would
    # make for the messages it delivered are kept (one receive per batch)
    result = measured.as_dict()
    calls = result["aws_calls"]
    calls["sqs:ReceiveMessage"] = measured.invocations
    calls.pop("sqs:GetQueueAttributes", None)
    queue = result["sqs_requests"].setdefault(stack.queue_url.rstrip("/").rsplit("/", 1)[-1], {})
    queue["ReceiveMessage"] = measured.invocations  # small messages: one request per batch
    queue.pop("GetQueueAttributes", None)
    return result
