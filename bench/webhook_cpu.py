"""The webhook's HTTP call, CPU only (issue 26: the registry sends an endpoint's notifications one
at a time, so each call's time is the wait of every push behind it).

The real handler (functions/webhook/app.py) in this process, moto in a process of its own as the
local stack runs it (``tagpin_local.moto_process``: this process's CPU is the function's alone,
its SQS client's HTTP included), a distribution notification of one tagged push with every field
the registry sends. ``--calls`` warm calls timed with ``time.process_time``; the same
calls again with ``SendMessage`` (botocore: parameters, signature, HTTP) not sent; then
each step of the call alone, the same number of times, to say where the rest goes.

Usage:  .venv/bin/python bench/webhook_cpu.py [--calls 500]
Prints figures only (a diagnosis: no results file, no figure in the docs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "common"), str(ROOT / "tools")]
from tagpin_local.moto_process import MotoProcess  # noqa: E402

from bench.webhook import CONFIG, TOKEN  # noqa: E402  (bench-webhook's configuration and token)

HEADERS = {
    "authorization": f"Bearer {TOKEN}",
    "content-type": "application/vnd.docker.distribution.events.v1+json",
    "user-agent": "Go-http-client/1.1",
    "accept-encoding": "gzip",
}


def registry_push(n: int) -> bytes:
    """One tagged manifest push as distribution notifies it (every field it sends)."""
    digest = f"sha256:{n:064x}"
    event = {
        "id": f"6b3b5b56-2b09-4b8c-bf8b-{n:012d}",
        "timestamp": "2026-11-27T06:30:00.123456789Z",
        "action": "push",
        "target": {
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "size": 1362,
            "digest": digest,
            "length": 1362,
            "repository": f"storm/app{n % 50}",
            "url": f"http://127.0.0.1:5000/v2/storm/app{n % 50}/manifests/{digest}",
            "tag": "stable",
        },
        "request": {
            "id": "d5e9c2f1-8a5b-4a2e-9f3c-5c3b1d2e4f6a",
            "addr": "127.0.0.1:50412",
            "host": "127.0.0.1:5000",
            "method": "PUT",
            "useragent": "docker/27.3.1 go/go1.22.7",
        },
        "actor": {},
        "source": {"addr": "registry:5000", "instanceID": "0e8f3a59-5d3e-4f0b-9a2f-0c7e0f1c9a11"},
    }
    return json.dumps({"events": [event]}, indent="   ").encode()


def per_call_us(calls: int, step: Callable[[int], object]) -> float:
    step(0)
    started = time.process_time()
    for n in range(calls):
        step(n)
    return (time.process_time() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    calls = parser.parse_args(argv).calls
    server = MotoProcess()  # moto in a process of its own, as the local stack runs it
    server.start()
    endpoint = f"http://127.0.0.1:{server.port}"
    os.environ.update(
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_ENDPOINT_URL=endpoint,
        TAGPIN_CONFIG_PARAMETER="/tagpin/config",
        TAGPIN_STATE_TABLE="tagpin-state",
        TAGPIN_WEBHOOK_SECRET="tagpin/webhook",
        POWERTOOLS_SERVICE_NAME="webhook",
        POWERTOOLS_LOG_LEVEL="INFO",  # as deployed: a 202 writes no line
        POWERTOOLS_METRICS_DISABLED="true",  # as the local stack runs (DetailedMonitoring=false)
        POWERTOOLS_TRACE_DISABLED="true",
    )
    try:
        return measure(calls)
    finally:
        server.stop()


def measure(calls: int) -> int:
    import boto3

    sqs = boto3.client("sqs")
    os.environ["TAGPIN_QUEUE_URL"] = sqs.create_queue(
        QueueName="changes.fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    os.environ["TAGPIN_NOTIFICATIONS_QUEUE_URL"] = sqs.create_queue(QueueName="notifications")["QueueUrl"]
    ssm = boto3.client("ssm")
    ssm.put_parameter(Name="/tagpin/config", Value=CONFIG, Type="String")
    ssm.put_parameter(Name="/tagpin/webhook", Value=json.dumps({"distribution": TOKEN}), Type="SecureString")

    from aws_lambda_powertools.logging import correlation_paths
    from tagpin import wiring
    from tagpin.adapters.http_api import http_request
    from tagpin.adapters.webhooks.sources import SOURCES
    from tagpin.observability import logger, metrics, own_keys
    from tagpin.ports.webhooks import Notification, Request
    from tagpin.usecases.webhook_events import validated
    from tagpin_local.lambda_events import http_api_event
    from tagpin_local.lambda_runtime import LocalContext, load_handler

    handler = load_handler("webhook")
    bodies = [registry_push(n) for n in range(calls + 1)]
    events = [
        http_api_event(
            "POST", "/webhooks/distribution", "", HEADERS, b, "192.0.2.1", "POST /webhooks/{source}"
        )
        for b in bodies
    ]
    contexts = [LocalContext("tagpin-webhook", timeout_s=15) for _ in events]
    for n in range(20):  # warm: clients, connection, configuration and secret cached
        assert handler(events[n % len(events)], contexts[n % len(events)])["statusCode"] == 202

    whole = per_call_us(calls, lambda n: handler(events[n], contexts[n]))
    service = wiring.webhook_service()
    client = wiring.aws("sqs")
    client.send_message = lambda **_: {}  # the call once more, its SendMessage not sent
    rest = per_call_us(calls, lambda n: handler(events[n], contexts[n]))
    del client.send_message
    event, context = events[0], contexts[0]
    request = http_request(event)
    headers = {k.lower(): v for k, v in request.headers.items()}
    source = SOURCES["distribution"]
    secret = service._secrets().get("distribution")
    parsed = source.parse(request.body, headers)
    note = Notification("distribution", tuple(e for e, _ in validated(parsed)), "request-id")

    def noop(event: dict[str, Any], context: Any) -> None:
        return None

    injected = logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)(noop)
    steps: dict[str, Callable[[int], object]] = {
        "logger.inject_lambda_context": lambda n: injected(event, context),
        "metrics.log_metrics": lambda n: metrics.log_metrics(noop)(event, context),
        "own_keys": lambda n: own_keys(noop)(event, context),
        "http_request (the event read)": lambda n: http_request(event),
        "the secret (cached)": lambda n: service._secrets(),
        "authenticate": lambda n: source.authenticate(
            "distribution", Request(headers, {}, request.body), secret
        ),
        "distribution.parse": lambda n: source.parse(request.body, headers),
        "validated": lambda n: validated(parsed),
        "the configuration (cached)": lambda n: service._config(),
        "Notification.to_json": lambda n: note.to_json(),
    }
    print(f"one registry push, the webhook's HTTP call, {calls} warm calls (moto in its own process):")
    print(f"  {'the whole call':44s} {whole:8.1f} us CPU")
    print(f"  {'  of which SendMessage (botocore, HTTP)':44s} {whole - rest:8.1f} us")
    print(f"  {'  the rest (the call, SendMessage not sent)':44s} {rest:8.1f} us")
    print("each step alone:")
    for name, step in steps.items():
        print(f"  {name:44s} {per_call_us(calls, step):8.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
