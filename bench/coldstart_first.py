"""The first invocation after a cold start, for the functions whose import ``bench/coldstart.py``
times: what a handler defers from its import (a lazy import) its first invocation pays, so both
are printed side by side and the cost cannot just move.

Each run is a fresh ``python -S`` process on the same PYTHONPATH as the import figures (the built
function and its layers): it imports ``app`` (timed as the import figures are), then calls
``lambda_handler`` once (the first invocation) and again with the same event (warm: for the
webhook the same delivery, queued again; for the poller a poll that finds nothing new), each
timed with ``perf_counter`` and ``process_time``. The AWS side is moto's server and the registry Debian's
``docker-registry``, both on 127.0.0.1; before every run a new image is pushed under the followed
tag, so every first invocation does the whole work of a push: the webhook's HTTP call
authenticates the delivery, loads the configuration and queues the notification on the
notifications queue (its check, the re-resolution at the registry, the record and the change
enqueued, is the same function's next invocation, from that queue: not timed here); the poller
loads the configuration, resolves the tag and enqueues the change.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import yaml
from tagpin_local.lambda_events import http_api_event
from tagpin_local.moto_process import MotoProcess
from tagpin_local.oci import push_image
from tagpin_local.registry_server import RegistryServer
from tagpin_local.tables import create_state_table

TOKEN = "coldstart-bench-token"
REPOSITORY = "demo/web"
TAG = "stable"
FUNCTIONS = ("WebhookFunction", "PollerFunction")

INVOKE_PROBE = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import app
t1, c1 = time.perf_counter(), time.process_time()

class Context:
    function_name = "tagpin-" + sys.argv[2]
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + function_name
    memory_limit_in_mb = 512
    aws_request_id = "coldstart-bench"
    log_group_name = log_stream_name = "bench"
    def get_remaining_time_in_millis(self):
        return 60000

first = app.lambda_handler(json.loads(sys.argv[1]), Context())
t2, c2 = time.perf_counter(), time.process_time()
app.lambda_handler(json.loads(sys.argv[1]), Context())
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"import_s": t1 - t0, "import_cpu_s": c1 - c0, "first_s": t2 - t1, "first_cpu_s": c2 - c1,
                  "warm_s": t3 - t2, "answer": first}, default=str))
"""


@contextmanager
def local_aws_and_registry(env: dict[str, str]) -> Iterator[tuple[dict[str, str], str, Callable[[], str]]]:
    """moto's server and a registry on 127.0.0.1 with what the webhook and the poller read: the state
    table, the changes queue, the configuration (one followed tag) and the webhook secret. Yields the
    probe's environment, the registry's host and ``push`` (a new image under the followed tag; its
    digest)."""
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
        yield probe_env, registry.host, lambda: push_image(registry.url, REPOSITORY, TAG)
    finally:
        registry.stop()
        moto.stop()


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
    python: str, env: dict[str, str], cwd: Path, event: dict[str, Any], service: str
) -> dict[str, Any]:
    proc = subprocess.run(
        [python, "-S", "-c", INVOKE_PROBE, json.dumps(event), service],
        check=False,
        env=env,
        cwd=str(cwd),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-12:]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def measure_first(
    python: str,
    env: dict[str, str],
    paths: dict[str, list[Path]],
    cwd: Path,
    runs: int,
) -> dict[str, Any]:
    """Per function: import, first and warm invocation (best and median of ``runs`` processes)."""
    results: dict[str, Any] = {}
    with local_aws_and_registry(env) as (probe_env, registry_host, push):
        for function in FUNCTIONS:
            service = function.removesuffix("Function").lower()
            fn_env = probe_env | {
                "POWERTOOLS_SERVICE_NAME": service,
                "PYTHONPATH": os.pathsep.join(str(p) for p in paths[function]),
            }
            samples = []
            for _ in range(runs):
                digest = push()
                sample = run_once(python, fn_env, cwd, event_for(function, registry_host, digest), service)
                if "error" in sample:
                    results[function] = {"error": sample["error"]}
                    break
                samples.append(sample)
                time.sleep(0.2)  # the registry's and moto's own work settles between runs
            else:
                results[function] = summarise(samples)
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
        "answer": samples[-1]["answer"],
    }


def print_first(results: dict[str, Any]) -> None:
    print("\nfirst invocation after the import (moto's server, docker-registry; 127.0.0.1), ms best/median:")
    print(f"{'function':<18}{'import':>14}{'first':>14}{'import+first':>16}{'first CPU':>14}{'warm':>14}")
    for function, r in results.items():
        if "error" in r:
            print(f"{function:<18} ERROR")
            for line in r["error"]:
                print(f"    {line}")
            continue
        cells = [r[k] for k in ("import", "first", "import_and_first", "first_cpu", "warm")]
        print(
            f"{function:<18}"
            + "".join(f"{c['best_s'] * 1000:>8.0f} /{c['median_s'] * 1000:>4.0f}" for c in cells[:1])
            + "".join(f"{c['best_s'] * 1000:>8.0f} /{c['median_s'] * 1000:>4.0f}" for c in cells[1:2])
            + "".join(f"{c['best_s'] * 1000:>10.0f} /{c['median_s'] * 1000:>4.0f}" for c in cells[2:3])
            + "".join(f"{c['best_s'] * 1000:>8.0f} /{c['median_s'] * 1000:>4.0f}" for c in cells[3:])
        )
