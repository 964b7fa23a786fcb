"""The first invocation after a cold start, for the functions whose import ``bench/coldstart.py``
times: what a handler defers from its import (a lazy import) its first invocation pays, so both
are printed side by side and the cost cannot just move.

Each run is a fresh ``python -S`` process on the same PYTHONPATH as the import figures (the built
function and its layers), a container not warmed (``tagpin_local.firstcall``, the process
tests/integration/test_warmed_first_call.py starts too): it imports ``app`` (timed as the import
figures are), then calls ``lambda_handler`` once (the first invocation) and again (warm), each
timed with ``perf_counter`` and ``process_time``. The AWS side is moto's server and the registry
Debian's ``docker-registry``, both on 127.0.0.1; before every invocation a new image is pushed
under the followed tag, so every one does the whole work of a push:

* the webhook's HTTP call authenticates the delivery, loads the configuration and queues the
  notification on the notifications queue;
* the webhook's check (the same function's next invocation, from that queue; a container of its
  own here, as on Lambda where the HTTP calls and the checks scale apart) loads the configuration,
  re-resolves the tag at the registry, records it and enqueues the change; it is given the
  notifications the HTTP rows queued;
* the poller loads the configuration, resolves the tag and enqueues the change.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import yaml
from tagpin.ports.webhooks import Notification
from tagpin_local.firstcall import Container, run_container
from tagpin_local.lambda_events import http_api_event, sqs_event
from tagpin_local.moto_process import MotoProcess
from tagpin_local.oci import push_image
from tagpin_local.registry_server import RegistryServer
from tagpin_local.tables import create_state_table

TOKEN = "coldstart-bench-token"
REPOSITORY = "demo/web"
TAG = "stable"

# Each row: a function's container (its handler, its service) and the stage it is given: the
# webhook's HTTP call (a registry's notification, which it queues), the webhook's check of what it
# queued (its next invocation, from the notifications queue), the poller's schedule.
ROWS = {
    "WebhookFunction": ("WebhookFunction", "http"),
    "WebhookFunction check": ("WebhookFunction", "check"),
    "PollerFunction": ("PollerFunction", "schedule"),
}


@dataclass(frozen=True)
class LocalAws:
    env: dict[str, str]  # the probe's
    host: str  # the registry's
    push: Callable[[], str]  # a new image under the followed tag: its digest
    # the oldest queued notification, as its event source hands it over, of the push of this digest
    queued: Callable[[str], dict[str, Any]]


@contextmanager
def local_aws_and_registry(env: dict[str, str]) -> Iterator[LocalAws]:
    """moto's server and a registry on 127.0.0.1 with what the webhook and the poller read: the state
    table, the changes and notifications queues, the configuration (one followed tag) and the
    webhook secret."""
    moto = MotoProcess()
    registry = RegistryServer()
    moto.start()
    try:
        registry.start()
        endpoint = "http://{}:{}".format(*moto.get_host_and_port())
        session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        create_state_table(session.client("dynamodb", endpoint_url=endpoint), env["TAGPIN_STATE_TABLE"])
        sqs = session.client("sqs", endpoint_url=endpoint)
        queue = sqs.create_queue(
            QueueName="tagpin-changes.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
        )
        notifications = sqs.create_queue(QueueName="tagpin-notifications")
        ssm = session.client("ssm", endpoint_url=endpoint)
        config = {
            "clusters": {"dev": {"kubeconfig": {"file": "/dev/null"}}},
            "registries": {registry.host: {"insecure": True}},
            "images": [
                {
                    "image": f"{registry.host}/{REPOSITORY}:{TAG}",
                    "targets": [{"cluster": "dev", "namespace": "demo", "name": "web", "container": "app"}],
                }
            ],
        }
        ssm.put_parameter(Name=env["TAGPIN_CONFIG_PARAMETER"], Value=yaml.safe_dump(config), Type="String")
        ssm.put_parameter(
            Name="/" + env["TAGPIN_WEBHOOK_SECRET"],
            Value=json.dumps({"distribution": TOKEN}),
            Type="SecureString",
        )
        probe_env = env | {
            "AWS_ENDPOINT_URL": endpoint,
            "TAGPIN_QUEUE_URL": queue["QueueUrl"],
            "TAGPIN_NOTIFICATIONS_QUEUE_URL": notifications["QueueUrl"],
        }
        arn = sqs.get_queue_attributes(QueueUrl=notifications["QueueUrl"], AttributeNames=["QueueArn"])

        def queued(digest: str) -> dict[str, Any]:
            url = notifications["QueueUrl"]
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=1)["Messages"]
            sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
            return sqs_event([pointed_to(messages[0], digest)], arn["Attributes"]["QueueArn"])

        yield LocalAws(probe_env, registry.host, lambda: push_image(registry.url, REPOSITORY, TAG), queued)
    finally:
        registry.stop()
        moto.stop()


def pointed_to(message: dict[str, Any], digest: str) -> dict[str, Any]:
    """A notification the webhook's HTTP path queued (its delivery id, never checked) as it would
    have queued it for the push of ``digest``, the tag's digest now. Checked as queued, its digest
    would be an earlier push's, which the registry no longer serves: the check would ask again
    until its confirmation delays ran out (``Detector``: 0.2 + 0.4 + 0.8 + 1.6 s), the ~3 s this
    row showed at each invocation, a stale notification's cost, not a check's."""
    queued = Notification.from_json(message["Body"])
    events = tuple(replace(event, digest=digest) for event in queued.events)
    body = replace(queued, events=events).to_json()
    return message | {"Body": body, "MD5OfBody": hashlib.md5(body.encode()).hexdigest()}


def event_for(function: str, host: str, digest: str) -> dict[str, Any]:
    """The webhook: a registry's push notification for the followed tag (a delivery id of its own);
    the poller: its schedule's event."""
    if function == "PollerFunction":
        return {
            "id": str(uuid.uuid4()),
            "source": "aws.events",
            "detail-type": "Scheduled Event",
            "detail": {},
        }
    envelope = {
        "events": [
            {
                "id": str(uuid.uuid4()),
                "action": "push",
                "timestamp": "2026-01-01T00:00:00Z",
                "target": {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "repository": REPOSITORY,
                    "tag": TAG,
                    "digest": digest,
                },
                "request": {"host": host},
            }
        ]
    }
    return http_api_event(
        "POST",
        "/webhooks/distribution",
        "",
        {
            "authorization": f"Bearer {TOKEN}",
            "content-type": "application/vnd.docker.distribution.events.v1+json",
        },
        json.dumps(envelope).encode(),
        "192.0.2.1",
        "POST /webhooks/{source}",
    )


def run_once(
    python: str, env: dict[str, str], code: Path, cwd: Path, local: LocalAws, function: str, stage: str
) -> Container:
    """A fresh container of ``function`` (``python -S``, its built ``code`` and path), not warmed: its
    import, then its first invocation and a warm one, each given the event of a push made just
    before it. The check's events are notifications the webhook's HTTP calls queued before."""
    service = function.removesuffix("Function").lower()

    def event() -> dict[str, Any]:
        digest = local.push()
        return local.queued(digest) if stage == "check" else event_for(function, local.host, digest)

    return run_container(
        service,
        code / "app.py",
        [event, event],
        python=python,
        env=env,
        warm=False,
        cwd=cwd,
        python_flags=("-S",),
    )


def measure_first(
    python: str,
    env: dict[str, str],
    paths: dict[str, list[Path]],
    cwd: Path,
    runs: int,
) -> dict[str, Any]:
    """Per row (``ROWS``): import, first and warm invocation (best and median of ``runs`` processes).
    The webhook's HTTP rows run first: each queues two notifications, which its check's rows check."""
    results: dict[str, Any] = {}
    with local_aws_and_registry(env) as local:
        for row, (function, stage) in ROWS.items():
            service = function.removesuffix("Function").lower()
            fn_env = local.env | {
                "POWERTOOLS_SERVICE_NAME": service,
                "PYTHONPATH": os.pathsep.join(str(p) for p in paths[function]),
            }
            samples = []
            for _ in range(runs):
                try:
                    container = run_once(python, fn_env, paths[function][0], cwd, local, function, stage)
                except RuntimeError as exc:
                    results[row] = {"error": str(exc).strip().splitlines()[-12:]}
                    break
                first, warm = container.calls
                samples.append(
                    {
                        "import_s": container.import_ms / 1000,
                        "import_cpu_s": container.import_cpu_ms / 1000,
                        "first_s": first.wall_ms / 1000,
                        "first_cpu_s": first.cpu_ms / 1000,
                        "warm_s": warm.wall_ms / 1000,
                        "warm_cpu_s": warm.cpu_ms / 1000,
                        "answer": first.answer,
                    }
                )
                time.sleep(0.2)  # the registry's and moto's own work settles between runs
            else:
                results[row] = summarise(samples)
    return results


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    def stat(key: str) -> dict[str, float]:
        values = [s[key] for s in samples]
        return {"best_s": min(values), "median_s": statistics.median(values)}

    return {
        "import": stat("import_s"),
        "import_cpu": stat("import_cpu_s"),
        "first": stat("first_s"),
        "first_cpu": stat("first_cpu_s"),
        "import_and_first": {
            "best_s": min(s["import_s"] + s["first_s"] for s in samples),
            "median_s": statistics.median(s["import_s"] + s["first_s"] for s in samples),
        },
        "warm": stat("warm_s"),
        "warm_cpu": stat("warm_cpu_s"),
        "answer": samples[-1]["answer"],
    }


def print_first(results: dict[str, Any]) -> None:
    print("\nfirst invocation after the import (moto's server, docker-registry; 127.0.0.1), ms best/median:")
    print(
        f"{'function':<22}{'import':>14}{'first':>14}{'import+first':>16}{'first CPU':>14}{'warm':>14}"
        f"{'warm CPU':>14}"
    )
    for function, r in results.items():
        if "error" in r:
            print(f"{function:<22} ERROR")
            for line in r["error"]:
                print(f"    {line}")
            continue
        cells = [r[k] for k in ("import", "first", "import_and_first", "first_cpu", "warm", "warm_cpu")]
        print(
            f"{function:<22}"
            + "".join(f"{c['best_s'] * 1000:>8.0f} /{c['median_s'] * 1000:>4.0f}" for c in cells[:1])
            + "".join(f"{c['best_s'] * 1000:>8.0f} /{c['median_s'] * 1000:>4.0f}" for c in cells[1:2])
            + "".join(f"{c['best_s'] * 1000:>10.0f} /{c['median_s'] * 1000:>4.0f}" for c in cells[2:3])
            + "".join(f"{c['best_s'] * 1000:>8.0f} /{c['median_s'] * 1000:>4.0f}" for c in cells[3:])
        )
