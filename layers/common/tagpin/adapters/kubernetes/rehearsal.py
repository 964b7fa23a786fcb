"""A workload's change rehearsed without sending it: the consumer's first change reads a workload
and patches it (``KubeWorkloads.get`` and ``set_image``), and the Kubernetes client's path of each
(its arguments' checks, the request's serialization, the content type's matching, which compiles
the client's regular expressions, the answer's reading and deserialization) ran for the first time
there, along with the adapter's own. Rehearsed at a container's start (``tagpin.warming``), that
path is not the first change's: measured with ``tagpin_local.firstcall`` and cProfile, a warmed
consumer's first change compiled 6 regular expressions of the client and made 5,400 Python calls
(102 functions) more than its later changes; with the rehearsal, none and 1,700 (57).

How, as ``tagpin.aws_warming`` does for botocore: ``install`` wraps the ``request`` of the client's
connection pool (``ApiClient.rest_client.pool_manager``, the one place the client sends from) once;
the wrapper answers only while its own thread is rehearsing (a thread-local flag), with a 200 and
the workload given, and otherwise sends. Nothing reaches the cluster: the workload named in a
rehearsal need not exist, and no permission is used."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import urllib3

from tagpin.adapters.kubernetes.workloads import KubeWorkloads
from tagpin.domain.kinds import ImageChange, Kind, profile_of

_REHEARSING = threading.local()
NAME = "tagpin-rehearsal"  # the namespace, the workload and the container a rehearsal names (never sent)
IMAGE = "rehearsal.invalid/tagpin/rehearsal:latest@sha256:" + "0" * 64


def install(api: Any) -> None:
    """Let ``api``'s (an ``ApiClient``) requests be rehearsed; once per client."""
    pool = api.rest_client.pool_manager
    if getattr(pool, "tagpin_rehearsal", False):
        return
    send = pool.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        answer = getattr(_REHEARSING, "answer", None)
        if answer is None:
            return send(method, url, *args, **kwargs)
        headers = {"content-type": "application/json"}
        return urllib3.HTTPResponse(body=answer, status=200, headers=headers, preload_content=False)

    pool.request = request
    pool.tagpin_rehearsal = True


@contextlib.contextmanager
def rehearsing(answer: bytes) -> Iterator[None]:
    """This thread's requests answered with ``answer`` (a 200, JSON) instead of sent."""
    outer = getattr(_REHEARSING, "answer", None)
    _REHEARSING.answer = answer
    try:
        yield
    finally:
        _REHEARSING.answer = outer


def workload(kind: Kind) -> dict[str, Any]:
    """A workload of ``kind`` as the API serves it: one container, at its pod template's place."""
    pod: dict[str, Any] = {"spec": {"containers": [{"name": NAME, "image": IMAGE}]}}
    for key in reversed(profile_of(kind).template):
        pod = {key: pod}
    meta = {"name": NAME, "namespace": NAME, "resourceVersion": "1", "generation": 1}
    return {**pod, "metadata": meta}


def rehearse_change(workloads: KubeWorkloads, kind: Kind) -> None:
    """A change to a workload of ``kind`` (its read, its patch), answered here: nothing is sent."""
    install(workloads.api)
    with rehearsing(json.dumps(workload(kind)).encode()):
        read = workloads.get(NAME, kind, NAME)
        change = ImageChange(read.resource_version, NAME, False, IMAGE, {"tagpin.io/rehearsal": "1"})
        workloads.set_image(NAME, kind, NAME, change)
