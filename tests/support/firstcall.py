"""A function's container started as the local runtime starts one, in a process of its own as on
Lambda: its handler loaded, then ``tagpin.warming`` (Lambda's init phase, provisioned concurrency);
then its invocations, one after the other (each event made just before its invocation: a push
between two). For each: the modules it imported (what warming left to
it), its CPU (``process_time``: the container's threads too) and its wall time, and its answer.

The process loads nothing but the handler, the layer and the probe (no ``tagpin_local``, no moto): a
module the local runtime happened to import first cannot hide one warming leaves out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tests.support.constants import ROOT

MARK = "FIRST-CALL-PROBE "
PROBE = r"""
import gc, importlib.util, json, sys, time
function = sys.argv[1]
from pydantic._internal._generate_schema import GenerateSchema  # pydantic: loaded by every handler
built = []  # each validator pydantic builds (a model, a TypeAdapter, a validate_call): its name
clean = GenerateSchema.clean_schema

def clean_schema(self, schema):
    target = schema.get("cls") or schema.get("function") or {}
    target = target.get("function") if isinstance(target, dict) else target
    built.append(getattr(target, "__qualname__", None) or schema.get("ref") or schema.get("type"))
    return clean(self, schema)

GenerateSchema.clean_schema = clean_schema
spec = importlib.util.spec_from_file_location("tagpin_function_" + function, sys.argv[2])
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)
if sys.argv[3] == "1":
    from tagpin.warming import warm
    warm(function)

def aws_setup():
    # botocore's per-operation setup so far, as (emitter, event) pairs: each client's event emitter
    # looks up an event's handlers once (_lookup_cache), at the first call of each operation; and
    # the endpoint ruleset's resolutions (each set of parameters resolved once: its cache misses).
    hooks, provider = sys.modules.get("botocore.hooks"), sys.modules.get("botocore.endpoint_provider")
    if hooks is None:
        return set(), 0
    emitters = [o for o in gc.get_objects() if isinstance(o, hooks.HierarchicalEmitter)]
    events = {(id(e), name) for e in emitters for name in e._lookup_cache if name.count(".") >= 2}
    misses = provider.EndpointProvider._resolve_endpoint.cache_info().misses if provider else 0
    return events, misses

class Context:
    function_name = "tagpin-" + function
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + function_name
    memory_limit_in_mb = 512
    aws_request_id = "first-call-probe"
    log_group_name = log_stream_name = "probe"
    def get_remaining_time_in_millis(self):
        return 60000

for line in sys.stdin:
    event = json.loads(line)
    (events, misses), before, built[:] = aws_setup(), set(sys.modules), []
    c0, t0 = time.process_time(), time.perf_counter()
    answer = app.lambda_handler(event, Context())
    c1, t1 = time.process_time(), time.perf_counter()
    events_after, misses_after = aws_setup()
    operations = {".".join(name.split(".")[1:3]) for _, name in events_after - events}
    call = {"imported": sorted(set(sys.modules) - before), "cpu_ms": (c1 - c0) * 1000,
            "wall_ms": (t1 - t0) * 1000, "answer": answer, "built": list(built),
            "aws_set_up": sorted(operations), "endpoints_resolved": misses_after - misses}
    print("\n__PROBE_MARK__" + json.dumps(call, default=str), flush=True)
""".replace("__PROBE_MARK__", MARK)

# What a first invocation must not import when its container was warmed: the library, and the
# packages whose import is most of a cold start (pydantic's models, the registry's HTTP client,
# the Kubernetes client, the AWS SDK, YAML).
WATCHED = ("tagpin", "pydantic", "pydantic_core", "aiohttp", "kubernetes", "boto3", "botocore", "yaml")


@dataclass(frozen=True)
class Call:
    imported: list[str]
    cpu_ms: float
    wall_ms: float
    answer: Any
    built: list[str]  # the pydantic validators it built (models, TypeAdapters, validate_call)
    aws_set_up: list[str]  # the AWS operations botocore set up at their first call ("sqs.SendMessage")
    endpoints_resolved: int  # the endpoint ruleset's resolutions of parameters not resolved before

    @property
    def watched(self) -> list[str]:
        """What it imported of ``WATCHED``."""
        return [m for m in self.imported if m.split(".")[0] in WATCHED]


def invoke_started_container(
    function: str, events: Iterable[Callable[[], dict[str, Any]]], *, warm: bool = True
) -> list[Call]:
    """Start ``function``'s container in a fresh process (warmed unless ``warm`` is False) with this
    process's environment (a local stack's, which sets it), and invoke it with each event, each
    made (called) once the invocation before it has returned."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "layers" / "common")}
    app = str(ROOT / "functions" / function / "app.py")
    command = [sys.executable, "-c", PROBE, function, app, "1" if warm else "0"]
    calls: list[Call] = []
    with (
        tempfile.TemporaryFile("w+") as errors,  # a file, not a pipe: nobody reads it meanwhile
        subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True, env=env
        ) as probe,
    ):
        assert probe.stdin is not None and probe.stdout is not None

        def failed() -> str:
            errors.seek(0)
            return errors.read()[-4000:]

        try:
            for make in events:
                probe.stdin.write(json.dumps(make()) + "\n")
                probe.stdin.flush()
                line = next((x for x in probe.stdout if x.startswith(MARK)), None)
                assert line is not None, failed()
                calls.append(Call(**json.loads(line.removeprefix(MARK))))
            probe.stdin.close()
            assert probe.wait(timeout=60) == 0, failed()
        finally:
            if probe.poll() is None:
                probe.kill()
    return calls
