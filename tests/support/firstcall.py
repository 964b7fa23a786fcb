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
import importlib.util, json, sys, time
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
    before, built[:] = set(sys.modules), []
    c0, t0 = time.process_time(), time.perf_counter()
    answer = app.lambda_handler(event, Context())
    c1, t1 = time.process_time(), time.perf_counter()
    call = {"imported": sorted(set(sys.modules) - before), "cpu_ms": (c1 - c0) * 1000,
            "wall_ms": (t1 - t0) * 1000, "answer": answer, "built": list(built)}
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
