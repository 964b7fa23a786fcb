"""moto's server in a process of its own (``StackOptions.processes``): the AWS endpoint no longer
shares the stack's interpreter and GIL with the clusters' fronts, the event sources' loops and the
tools. The same server as ``moto.server.ThreadedMotoServer`` (moto's Flask app under werkzeug, a
thread per connection), with the same local speed-up (``stack_aws._cache_moto_modules``) and the
same DynamoDB requests one at a time (``serialize_dynamodb``, which the in-process server uses
too), the same Query of one partition (:mod:`.moto_partitions`) and the same expressions parsed
once per text (:mod:`.moto_expressions`); its connections kept alive
between requests, and its requests counted (:mod:`.moto_server`). Its threads may run at a higher
scheduling priority than the rest of the stack (``StackOptions.moto_priority``: bench.concurrency).

    python -m tagpin_local.moto_process <port> [<priority>]
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from tagpin_local.registry_server import free_port

START_TIMEOUT_S = 60.0
# a scheduling priority (nice) above the rest of the stack's (0) for moto's process, see ``main``
PRIORITY = -10
_DYNAMODB = threading.RLock()
# the rows serialize_dynamodb adds to the process's request counts (moto_server.count)
LOCK_WAITED = "moto: DynamoDB lock waited"
LOCK_HELD = "moto: DynamoDB lock held"


def serialize_dynamodb() -> None:
    """Answer one DynamoDB request at a time in this process's moto server (once per process).

    moto's server runs a thread per request, and its DynamoDB backend is not thread-safe (moto says
    so: getmoto/moto#372, and its docs since getmoto/moto#7166): a Query or Scan walks the table's
    dicts (``Table.all_items``, ``has_idx_items``) while another request's put adds an item to them,
    and the walk fails with ``RuntimeError: dictionary changed size during iteration``, an HTTP 500
    that botocore retries with backoff; and a conditional write's check and write are not atomic
    against another thread's. DynamoDB is neither: each request is atomic on its items. One lock
    around each of moto's DynamoDB operations (``DynamoHandler.get_item``, ``.update_item``...)
    gives that back; requests to other services, and the work of other threads, go on meanwhile.
    Nothing the functions send or receive changes.

    The lock covers the operation only, from the parsed request to its answer's values
    (``_snapshot``): the request's parsing (moto's ``setup_class``, before ``call_action``) and the
    answer's encoding (``BaseResponse.serialized``: botocore's shapes walked, ``json.dumps``, its
    CRC32) are outside it, and hold no other DynamoDB request back.

    Each request's wait for the lock, and its wall and CPU seconds holding it, are counted
    (``LOCK_WAITED``, ``LOCK_HELD``: rows of ``moto_server``'s counts): in a storm the wait is
    most of a DynamoDB request's wall."""
    from moto.core.utils import camelcase_to_underscores, get_service_model
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler, "serialized_operations", False):
        return
    for name in get_service_model("dynamodb").operation_names:
        action = getattr(DynamoHandler, camelcase_to_underscores(name), None)
        if callable(action):
            setattr(DynamoHandler, camelcase_to_underscores(name), _locked(action))
    DynamoHandler.serialized_operations = True  # type: ignore[attr-defined]


def _locked(action: Callable[..., Any]) -> Callable[..., Any]:
    from tagpin_local.moto_server import count

    @functools.wraps(action)
    def locked(self: Any) -> Any:
        asked = time.monotonic()
        with _DYNAMODB:
            got, cpu = time.monotonic(), time.thread_time()
            try:
                return _snapshot(action(self))
            finally:
                held, cpu = time.monotonic() - got, time.thread_time() - cpu
                count(LOCK_WAITED, got - asked, 0.0)
                count(LOCK_HELD, held, cpu)

    return locked


def _snapshot(answer: Any) -> Any:
    """An operation's answer sharing no value with moto's tables, encoded after the lock.

    moto updates a stored item in place (``UpdateExpressionExecutor`` sets its attributes one by
    one), so an answer still holding an item's ``DynamoType`` values, encoded while another
    request updates that item, could mix the item's states. Most of DynamoDB's operations answer a
    ``DynamoResult`` (every item read, written or deleted), which is such a snapshot already: its
    constructor (``dynamo_to_dict``) builds a new dict or list for every dict, list and
    ``DynamoType`` in the answer, down to leaves that are strings, bytes, numbers and booleans
    (immutable); an ``EmptyResult`` holds nothing; an error is encoded as it is raised
    (``JsonRESTError.description``), so under the lock. Any other ``ActionResult`` (a table's
    tags, its time to live...) is copied here, whole. A string answer is immutable."""
    from moto.core.responses import ActionResult, EmptyResult
    from moto.dynamodb.responses import DynamoResult

    if type(answer) in (DynamoResult, EmptyResult) or not isinstance(answer, ActionResult):
        return answer
    copied = copy.copy(answer)
    copied._result = copy.deepcopy(answer.result)
    return copied


class MotoProcess:
    """What the stack uses of ``ThreadedMotoServer``: ``start``, ``get_host_and_port``, ``stop``."""

    def __init__(self, priority: int = 0) -> None:
        self.priority = priority
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        command = [sys.executable, "-m", "tagpin_local.moto_process", str(self.port), str(self.priority)]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL)

    def wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                httpx.get(f"{self.url}/moto-api/", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto's server did not start on port {self.port}") from None
                time.sleep(0.1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

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


def main(port: str, priority: int = 0) -> None:
    from tagpin_local import moto_expressions, moto_partitions, moto_transactions
    from tagpin_local.moto_process import serialize_dynamodb  # the module's, not this __main__'s copy
    from tagpin_local.moto_server import serve
    from tagpin_local.stack_aws import _cache_moto_modules

    # DynamoDB's requests hold one lock each (serialize_dynamodb): when the machine's cores are busy
    # (a storm: the API server, the registry, the containers), the holder waits for a core while
    # every other request waits for the lock, and the wait, not moto's work, is most of a
    # request's wall. On AWS, DynamoDB does not share the functions' cores: moto's processes get
    # them first (``PRIORITY``). Only a privileged user may raise a priority; elsewhere moto runs
    # as it did. Not the default: it takes the cores first from whatever else runs on the machine
    # (a test beside it with a deadline), so the bench asks for it (StackOptions.moto_priority).
    if priority:
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, 0, priority)
    _cache_moto_modules()
    serialize_dynamodb()
    moto_partitions.install()
    moto_transactions.install()
    moto_expressions.install()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # its access log
    os.environ["MOTO_PORT"] = port  # as moto.server sets it
    serve(int(port))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
