"""The local stack's moto servers (:mod:`tagpin_local.stack`): where each AWS service is answered.

* Threads (``StackOptions.processes`` off): one ``ThreadedMotoServer`` in the stack's process,
  every service on it (``endpoint``).
* Processes: moto in processes of its own (:mod:`.moto_process`), two of them. One answers
  DynamoDB, SSM, Secrets Manager, STS... (``endpoint``, ``AWS_ENDPOINT_URL``); the other SQS, SNS
  and EventBridge (``queues_endpoint``, botocore's service-specific ``AWS_ENDPOINT_URL_SQS``,
  ``AWS_ENDPOINT_URL_SNS`` and ``AWS_ENDPOINT_URL_EVENTBRIDGE``: the functions' code is unchanged).
  Those three deliver to one another inside moto (a topic's SQS subscription, a rule's queue
  target), so they stay together. Why apart: DynamoDB's requests are answered one at a time
  (``moto_process.serialize_dynamodb``), and a request holding that lock waits for the process's
  GIL behind whatever else the process runs: the SQS and SNS requests of a storm (a quarter of
  moto's CPU), their long polls. In a process of their own they take none of the GIL of DynamoDB's.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from tagpin_local.moto_process import MotoProcess, serialize_dynamodb
from tagpin_local.registry_server import free_port

# boto3's name of each service the queues' server answers -> botocore's service id, as its
# environment variable names it (AWS_ENDPOINT_URL_<ID>)
QUEUE_SERVICES = {"sqs": "SQS", "sns": "SNS", "events": "EVENTBRIDGE"}


def endpoint_variables(endpoint: str, queues_endpoint: str) -> dict[str, str]:
    """The SDK's endpoint settings (the functions' environment, the stack's process): every service
    at ``endpoint``, but SQS, SNS and EventBridge at ``queues_endpoint`` when apart."""
    found = {"AWS_ENDPOINT_URL": endpoint}
    if queues_endpoint != endpoint:
        found |= {f"AWS_ENDPOINT_URL_{name}": queues_endpoint for name in QUEUE_SERVICES.values()}
    return found


def endpoint_of(service: str, endpoint: str, queues_endpoint: str) -> str:
    """Where boto3's ``service`` ("sqs", "dynamodb"...) is answered."""
    return queues_endpoint if service in QUEUE_SERVICES else endpoint


class MotoServers:
    """The stack's moto: ``start``, the endpoints, ``reset``, ``stop``."""

    def __init__(self, processes: bool) -> None:
        self.processes = processes
        self._servers: list[Any] = []
        self.endpoint = ""
        self.queues_endpoint = ""  # SQS, SNS, EventBridge: ``endpoint`` when one server answers all

    def start(self) -> None:
        if self.processes:
            main, queues = MotoProcess(), MotoProcess()
            while queues.port == main.port:  # free_port may find the same port twice
                queues.port = free_port()
            self._servers = [main, queues]
            for server in self._servers:
                server.spawn()  # side by side: each imports moto (a second or two)
            for server in self._servers:
                try:
                    server.wait_ready()
                except RuntimeError:  # its port taken meanwhile by another program: once more
                    server.port = free_port()
                    server.start()
            self.endpoint, self.queues_endpoint = main.url, queues.url
            return
        from moto.server import ThreadedMotoServer

        from tagpin_local import moto_expressions, moto_partitions
        from tagpin_local.stack_aws import _cache_moto_modules

        _cache_moto_modules()
        serialize_dynamodb()
        moto_partitions.install()
        moto_expressions.install()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._servers = [server]
        server.start()
        host, port = server.get_host_and_port()
        self.endpoint = self.queues_endpoint = f"http://{host}:{port}"

    @property
    def endpoints(self) -> list[str]:
        """Every server's endpoint, once each."""
        return list(dict.fromkeys([self.endpoint, self.queues_endpoint]))

    def pids(self) -> dict[int, str]:
        """The servers' processes (processes only): pid -> its role in a CPU table."""
        roles = ["moto server", "moto server (SQS, SNS)"]
        return {
            s.pid: role for s, role in zip(self._servers, roles, strict=False) if isinstance(s, MotoProcess)
        }

    def reset(self) -> None:
        """moto keeps its backends per process: an empty account on every server."""
        for endpoint in self.endpoints:
            httpx.post(f"{endpoint}/moto-api/reset", timeout=10).raise_for_status()

    def stop(self) -> None:
        for server in self._servers:
            server.stop()
