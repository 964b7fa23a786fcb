"""moto's server in a process of its own (``StackOptions.processes``): the AWS endpoint no longer
shares the stack's interpreter and GIL with the clusters' fronts, the event sources' loops and the
tools. The same server as ``moto.server.ThreadedMotoServer`` (moto's Flask app under werkzeug, a
thread per connection), with the same local speed-up (``stack_aws._cache_moto_modules``) and the
same DynamoDB requests one at a time (``serialize_dynamodb``, which the in-process server uses
too), the same Query of one partition (:mod:`.moto_partitions`) and the same expressions parsed
once per text (:mod:`.moto_expressions`); its connections kept alive
between requests, and its requests counted (:mod:`.moto_server`).

    python -m tagpin_local.moto_process <port>
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from typing import Any

import httpx

from tagpin_local.registry_server import free_port

START_TIMEOUT_S = 60.0
_DYNAMODB = threading.RLock()


def serialize_dynamodb() -> None:
    """Answer one DynamoDB request at a time in this process's moto server (once per process).

    moto's server runs a thread per request, and its DynamoDB backend is not thread-safe (moto says
    so: getmoto/moto#372, and its docs since getmoto/moto#7166): a Query or Scan walks the table's
    dicts (``Table.all_items``, ``has_idx_items``) while another request's put adds an item to them,
    and the walk fails with ``RuntimeError: dictionary changed size during iteration``, an HTTP 500
    that botocore retries with backoff; and a conditional write's check and write are not atomic
    against another thread's. DynamoDB is neither: each request is atomic on its items. One lock
    around moto's DynamoDB request handler gives that back; requests to other services, and the
    work of other threads, go on meanwhile. Nothing the functions send or receive changes."""
    from moto.dynamodb.responses import DynamoHandler

    call_action = DynamoHandler.call_action
    if getattr(call_action, "serialized", False):
        return

    def serialized(self: Any) -> Any:
        with _DYNAMODB:
            return call_action(self)

    serialized.serialized = True  # type: ignore[attr-defined]
    DynamoHandler.call_action = serialized  # type: ignore[method-assign]


class MotoProcess:
    """What the stack uses of ``ThreadedMotoServer``: ``start``, ``get_host_and_port``, ``stop``."""

    def __init__(self) -> None:
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "tagpin_local.moto_process", str(self.port)]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/moto-api/", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto's server did not start on port {self.port}") from None
                time.sleep(0.1)

    def get_host_and_port(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds (a server holding many items can take
        longer than that to tear its interpreter down on a busy machine)."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=30)


def main(port: str) -> None:
    from tagpin_local import moto_expressions, moto_partitions
    from tagpin_local.moto_server import serve
    from tagpin_local.stack_aws import _cache_moto_modules

    _cache_moto_modules()
    serialize_dynamodb()
    moto_partitions.install()
    moto_expressions.install()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # its access log
    os.environ["MOTO_PORT"] = port  # as moto.server sets it
    serve(int(port))


if __name__ == "__main__":
    main(sys.argv[1])
