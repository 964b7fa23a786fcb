"""A function's container started in a process of its own, as on Lambda, and its invocations
observed: what ``bench/coldstart`` times (the import, the first invocation after it, a warm one) and
what ``tests/integration/test_warmed_first_call.py`` checks (what a warmed container's first
invocation still imports or builds) are the same process, defined once here.

The process loads the handler (``app.py``: its import timed, in wall and CPU time), then
``tagpin.warming`` when asked (Lambda's init phase, provisioned concurrency), then answers the events
it reads on stdin, one JSON document a line, each made by the caller once the invocation before it
has returned (a push between two). For each invocation it prints: the modules it imported, the
pydantic validators it built, the AWS operations botocore set up at their first call, the
endpoints and the model's shapes it resolved, the regular expressions it compiled, the AWS calls it
made, the threads it started and the TCP connections it opened, its CPU (``process_time``: the
container's threads too) and wall time, and its answer. It loads nothing but the handler, its
layers and this probe (no ``tagpin_local``, no moto): a module the caller happened to import
cannot hide one the invocation imports.

Here rather than in tests/support: the benchmarks import ``tagpin_local`` (the local runtime's
tools), never the test suite's helpers, and both run a function as the local runtime would."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARK = "FIRST-CALL-PROBE "
PROBE = r"""
import gc, importlib.util, json, os, sys, threading, time
function, path, warmed = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
profile = os.environ.get("TAGPIN_FIRSTCALL_PROFILE")  # a file prefix: each call's cProfile stats
t0, c0 = time.perf_counter(), time.process_time()
spec = importlib.util.spec_from_file_location("app", path)
app = importlib.util.module_from_spec(spec)
sys.modules["app"] = app
spec.loader.exec_module(app)
t1, c1 = time.perf_counter(), time.process_time()
import socket  # after the handler's import, which it may import (timed there)
connects = []  # each TCP connection this process opened (urllib3's and asyncio's both call connect)
_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex

def connect(self, address):
    connects.append("%s:%s" % address[:2] if isinstance(address, tuple) else str(address))
    return _connect(self, address)

def connect_ex(self, address):
    connects.append("%s:%s" % address[:2] if isinstance(address, tuple) else str(address))
    return _connect_ex(self, address)

socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
built = []  # each validator pydantic builds (a model, a TypeAdapter, a validate_call): its name
try:  # pydantic: loaded by every handler's import
    from pydantic._internal._generate_schema import GenerateSchema
except ImportError:
    pass
else:
    clean = GenerateSchema.clean_schema

    def clean_schema(self, schema):
        target = schema.get("cls") or schema.get("function") or {}
        target = target.get("function") if isinstance(target, dict) else target
        built.append(getattr(target, "__qualname__", None) or schema.get("ref") or schema.get("type"))
        return clean(self, schema)

    GenerateSchema.clean_schema = clean_schema
if warmed:
    from tagpin.warming import warm
    warm(function)
import re._compiler
compiled = []  # each regular expression compiled (a miss of re's cache: a pattern first used)
_compile_regex = re._compiler.compile

def compile_regex(p, flags=0):
    compiled.append(str(getattr(p, "pattern", p))[:80])
    return _compile_regex(p, flags)

re._compiler.compile = compile_regex
sent = []  # each AWS call made ("dynamodb.PutItem"), in any thread
resolved = [0]  # the shapes botocore's model resolved (each once: an operation's, an answer's)
if "botocore.client" in sys.modules:  # loaded by the handler or warming: never imported here
    from botocore.client import BaseClient
    make_api_call = BaseClient._make_api_call

    def _make_api_call(self, operation_name, api_params):
        sent.append(self.meta.service_model.service_name + "." + operation_name)
        return make_api_call(self, operation_name, api_params)

    BaseClient._make_api_call = _make_api_call
    from botocore.model import ShapeResolver

    get_shape_by_name = ShapeResolver.get_shape_by_name

    def _get_shape_by_name(self, shape_name, member_traits=None):
        resolved[0] += 1
        return get_shape_by_name(self, shape_name, member_traits)

    ShapeResolver.get_shape_by_name = _get_shape_by_name
started = {"import_ms": (t1 - t0) * 1000, "import_cpu_ms": (c1 - c0) * 1000}
print("\n__PROBE_MARK__" + json.dumps(started), flush=True)

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

calls = 0
for line in sys.stdin:
    event = json.loads(line)
    (events, misses), before, built[:] = aws_setup(), set(sys.modules), []
    running, connects[:], sent[:], compiled[:] = set(threading.enumerate()), [], [], []
    shapes = resolved[0]
    if profile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    c0, t0 = time.process_time(), time.perf_counter()
    answer = app.lambda_handler(event, Context())
    c1, t1 = time.process_time(), time.perf_counter()
    if profile:
        profiler.disable()
        profiler.dump_stats("%s.%s.%d" % (profile, function, calls))
    calls += 1
    events_after, misses_after = aws_setup()
    operations = {".".join(name.split(".")[1:3]) for _, name in events_after - events}
    started = sorted(t.name for t in set(threading.enumerate()) - running)
    call = {"imported": sorted(set(sys.modules) - before), "cpu_ms": (c1 - c0) * 1000,
            "wall_ms": (t1 - t0) * 1000, "answer": answer, "built": list(built),
            "aws_set_up": sorted(operations), "endpoints_resolved": misses_after - misses,
            "threads_started": started, "connections": list(connects),
            "aws_calls": sorted(sent), "shapes_resolved": resolved[0] - shapes,
            "regexes_compiled": list(compiled)}
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
    threads_started: list[str]  # the threads it started that still run after it (their names)
    connections: list[str]  # the TCP connections it opened ("127.0.0.1:5000"), in order
    # Counted where botocore was loaded before the first invocation (by the handler or warming: the
    # probe imports nothing a cold container's first invocation would): the AWS calls it made
    # ("dynamodb.PutItem"), sorted, and the shapes of botocore's model it resolved (a parameter's
    # or an answer's, serialized or parsed the first time).
    aws_calls: list[str]
    shapes_resolved: int
    regexes_compiled: list[str]  # the regular expressions it compiled (first used: not in re's cache)

    @property
    def watched(self) -> list[str]:
        """What it imported of ``WATCHED``."""
        return [m for m in self.imported if m.split(".")[0] in WATCHED]


@dataclass(frozen=True)
class Container:
    import_ms: float  # the handler's import (wall), warming not included
    import_cpu_ms: float
    calls: list[Call]


def run_container(
    function: str,
    app: Path,
    events: Iterable[Callable[[], dict[str, Any]]],
    *,
    python: str,
    env: Mapping[str, str],
    warm: bool,
    cwd: Path | None = None,
    python_flags: tuple[str, ...] = (),
) -> Container:
    """Start ``function``'s container (its handler ``app``) in a fresh ``python`` process with
    ``env`` (warmed when ``warm``), and invoke it with each event, each made (called) once the
    invocation before it has returned. A failure raises ``RuntimeError`` with the process's stderr."""
    command = [python, *python_flags, "-c", PROBE, function, str(app), "1" if warm else "0"]
    calls: list[Call] = []
    with (
        tempfile.TemporaryFile("w+") as errors,  # a file, not a pipe: nobody reads it meanwhile
        subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=dict(env),
            cwd=None if cwd is None else str(cwd),
        ) as probe,
    ):
        assert probe.stdin is not None and probe.stdout is not None

        def marked() -> dict[str, Any]:
            line = next((x for x in probe.stdout if x.startswith(MARK)), None)  # type: ignore[union-attr]
            if line is None:
                errors.seek(0)
                raise RuntimeError(errors.read()[-4000:])
            found: dict[str, Any] = json.loads(line.removeprefix(MARK))
            return found

        try:
            started = marked()
            for make in events:
                probe.stdin.write(json.dumps(make()) + "\n")
                probe.stdin.flush()
                calls.append(Call(**marked()))
            probe.stdin.close()
            if probe.wait(timeout=60) != 0:
                errors.seek(0)
                raise RuntimeError(errors.read()[-4000:])
        finally:
            if probe.poll() is None:
                probe.kill()
    return Container(started["import_ms"], started["import_cpu_ms"], calls)
