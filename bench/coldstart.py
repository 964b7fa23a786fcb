"""Cold-start figures of the built Lambda artifacts (run after `sam build`).

The functions are arm64; this machine is x86_64 and cannot import aarch64 wheels, so
``make bench-coldstart`` builds the same template into .aws-sam/build-host with the host's
wheels (``LAYER_PLATFORM=manylinux2014_x86_64``) and measures that (``--build-dir``): the same
packages and the same pycs, measured on this host's CPU (the JSON records the host).

For each function in the build directory:
  * unzipped size of the function dir plus its layers (MB), with and without .pyc, and the
    deflate-zipped size (what is uploaded) (bench/coldstart_artifacts.py);
  * cold import time of the handler module ``app`` as built: a fresh interpreter per run,
    function dir and layer dirs on PYTHONPATH in Lambda's order (/var/task first, then the
    layers, then the runtime's boto3), ``-S`` so nothing from the host's site-packages
    leaks in, and ``PYTHONDONTWRITEBYTECODE`` because /var/task and /opt are read-only on
    Lambda: code without a precompiled .pyc is compiled again on every cold start;
  * both as built (layers carry unchecked-hash pycs) and on a copy with every .pyc removed
    (what SAM's default python_pip workflow would ship);
  * whether ``kubernetes`` is in sys.modules after the import (must be False for the
    poller and the webhook);
  * the first invocation after that import (bench/coldstart_first.py) of the webhook's HTTP call, of
    the webhook's check of what that call queued, and of the poller.

Usage:  .venv/bin/python bench/coldstart.py [--runs 11] [--python python3.13]
Writes bench/results/coldstart.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # a script: bench/ is on the path, the package is not

from bench.coldstart_artifacts import built_layout, measure_artifacts  # noqa: E402
from bench.coldstart_first import measure_first, print_first  # noqa: E402

BUILD = ROOT / ".aws-sam" / "build"
WORK = ROOT / ".aws-sam" / "bench"  # scratch (git-ignored): pyc-less copies, runtime boto3
RESULTS = ROOT / "bench" / "results" / "coldstart.json"
FUNCTIONS = ("PollerFunction", "WebhookFunction", "ConsumerFunction", "ConsoleFunction")
MUST_NOT_LOAD_KUBERNETES = ("PollerFunction", "WebhookFunction", "ConsoleFunction")
LAMBDA_UNZIPPED_LIMIT_MB = 250.0
# Fresh processes per figure (the median of them): 5 were too few on a machine shared with other work,
# where one slow run in five moved a median by 10-25 %; 11 take about a minute longer.
RUNS = 11

# Handlers must import without AWS: dummies only, and an endpoint that refuses connections
# so that an AWS call at import time fails fast instead of leaving the machine.
STUB_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_METRICS_NAMESPACE": "tagpin",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_DEV": "0",
    "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
    "TAGPIN_STATE_TABLE": "tagpin-state",
    "TAGPIN_IDEMPOTENCY_TABLE": "tagpin-idempotency",
    "TAGPIN_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/tagpin-changes.fifo",
    "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook",
    "TAGPIN_NOTIFICATIONS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/tagpin-notifications",
    "TAGPIN_DEAD_LETTER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/tagpin-changes-dlq.fifo",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}

PROBE = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
{body}
t1, c1 = time.perf_counter(), time.process_time()
print(json.dumps({{"import_s": t1 - t0, "cpu_s": c1 - c0, "kubernetes": "kubernetes" in sys.modules,
                  "modules": len(sys.modules), "has_handler": {has_handler}}}))
"""
# What the functions that patch workloads import at their first change (the Kubernetes client,
# lazily: the webhook and the poller never do): their cold start as their first change sees it.
FIRST_CHANGE_BODY = "import app\nimport tagpin.adapters.kubernetes.clusters"
FIRST_CHANGE = ("ConsumerFunction", "ReconcilerFunction")
HANDLER_BODY = "import app"
HANDLER_CHECK = 'callable(getattr(sys.modules["app"], "lambda_handler", None))'

# Library-only references, independent of the handler code: what the handlers are expected
# to import (observability, batch, idempotency, parser, http client; the sync k8s client).
REFERENCE_COMMON = (
    "from aws_lambda_powertools import Logger, Metrics, Tracer\n"
    "from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response\n"
    "from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function\n"
    "from aws_lambda_powertools.utilities.parser.models import SqsModel, EventBridgeModel\n"
    "from aws_lambda_powertools.event_handler import APIGatewayHttpResolver\n"
    "import aiohttp, pydantic, yaml, boto3\n"
)
REFERENCE_K8S = (
    "from kubernetes.client import ApiClient, AppsV1Api, Configuration\n"
    "AppsV1Api(ApiClient(Configuration()))\n"
    "import tagpin.adapters.kubernetes.clusters  # imported by the consumer on first use\n"
)
REFERENCES = {
    "ref:common-libs": (("CommonLayer",), REFERENCE_COMMON),
    "ref:k8s-client": (("CommonLayer", "KubernetesLayer"), REFERENCE_K8S),
    "ref:consumer-libs": (("CommonLayer", "KubernetesLayer"), REFERENCE_COMMON + REFERENCE_K8S),
}


def runtime_boto3(python: str) -> Path:
    """boto3 as the Lambda runtime provides it (/var/runtime); installed once into the scratch dir."""
    target = WORK / "runtime"
    if not (target / "boto3").is_dir():
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "boto3", "-t", str(target)],
            check=True,
        )
    return target


def python_paths(code: Path, layers: list[tuple[str, Path]], runtime: Path) -> list[Path]:
    # Lambda: /var/task, then /opt/python (layers merged, later layers win), then /var/runtime
    return [code, *[layer / "python" for _, layer in reversed(layers)], runtime]


def stub_env() -> dict[str, str]:
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AWS_", "POWERTOOLS_", "TAGPIN_"))
    }
    return keep | STUB_ENV


def run_probe(python: str, paths: list[Path], service: str, body: str | None) -> dict[str, Any]:
    env = stub_env()
    env["POWERTOOLS_SERVICE_NAME"] = service
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    probe = PROBE.format(body=body or HANDLER_BODY, has_handler="None" if body else HANDLER_CHECK)
    started = time.perf_counter()
    proc = subprocess.run(
        [python, "-S", "-c", probe],
        check=False,
        env=env,
        cwd=str(WORK),
        capture_output=True,
        text=True,
        timeout=120,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-12:], "wall_s": wall}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [s["error"] for s in samples if "error" in s]
    if errors:
        return {"error": errors[0]}
    imports = [s["import_s"] for s in samples]
    walls = [s["wall_s"] for s in samples]
    return {
        "import_best_s": min(imports),
        "import_median_s": statistics.median(imports),
        "import_cpu_median_s": statistics.median(s["cpu_s"] for s in samples),
        "process_best_s": min(walls),
        "process_median_s": statistics.median(walls),
        "kubernetes_in_sys_modules": samples[0]["kubernetes"],
        "modules": samples[0]["modules"],
        "has_lambda_handler": samples[0]["has_handler"],
    }


# One probe: (python, PYTHONPATH, service, body or None for the handler's import).
Probe = tuple[str, list[Path], str, str | None]


def measure_all(probes: dict[str, Probe], runs: int) -> dict[str, dict[str, Any]]:
    """Every probe ``runs`` times, in rounds (each round runs every probe once, in order): a burst of
    load from elsewhere on a shared machine then falls on every row alike, not on one row's runs."""
    samples: dict[str, list[dict[str, Any]]] = {key: [] for key in probes}
    for _ in range(runs):
        for key, probe in probes.items():
            samples[key].append(run_probe(*probe))
    return {key: summary(found) for key, found in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--python", default="python3.13", help="interpreter matching the Lambda runtime")
    parser.add_argument("--no-zip", action="store_true", help="skip the zipped-size computation")
    parser.add_argument("--build-dir", type=Path, default=BUILD, help="the sam build directory to measure")
    parser.add_argument("--no-first", action="store_true", help="skip the first invocations (moto, registry)")
    args = parser.parse_args()

    version = subprocess.run(
        [args.python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not version.startswith("3.13."):
        sys.exit(f"{args.python} is Python {version}; the runtime is python3.13 (give --python)")

    layout = built_layout(args.build_dir.resolve(), FUNCTIONS)  # the probes run in WORK: absolute paths
    WORK.mkdir(parents=True, exist_ok=True)
    runtime = runtime_boto3(args.python)

    artifacts, nopyc = measure_artifacts(layout, WORK / "nopyc", zipped=not args.no_zip)

    probes: dict[str, Probe] = {}
    functions: dict[str, Any] = {}
    for fn, info in layout.items():
        names = [fn, *[n for n, _ in info["layers"]]]
        service = fn.removesuffix("Function").lower()
        as_built = python_paths(info["code"], info["layers"], runtime)
        stripped = python_paths(nopyc[fn], [(n, nopyc[n]) for n, _ in info["layers"]], runtime)
        functions[fn] = {
            "layers": [n for n, _ in info["layers"]],
            "unzipped_mb": sum(artifacts[n]["unzipped_mb"] for n in names),
            "unzipped_no_pyc_mb": sum(artifacts[n]["unzipped_no_pyc_mb"] for n in names),
            "zipped_mb": None if args.no_zip else sum(artifacts[n]["zipped_mb"] for n in names),
        }
        probes[f"{fn}/with_pyc"] = (args.python, as_built, service, None)
        probes[f"{fn}/without_pyc"] = (args.python, stripped, service, None)
        if fn in FIRST_CHANGE:
            probes[f"{fn}/first_change"] = (args.python, as_built, service, FIRST_CHANGE_BODY)

    code_dir = WORK / "empty-task"  # stands in for /var/task in the library-only references
    code_dir.mkdir(parents=True, exist_ok=True)
    references: dict[str, Any] = {}
    for ref, (layer_names, body) in REFERENCES.items():
        if not all(n in artifacts for n in layer_names):
            continue
        built = {n: p for info in layout.values() for n, p in info["layers"]}
        with_layers = [(n, built[n]) for n in layer_names]
        without = [(n, nopyc[n]) for n in layer_names]
        references[ref] = {"layers": list(layer_names)}
        probes[f"{ref}/with_pyc"] = (args.python, python_paths(code_dir, with_layers, runtime), "bench", body)
        probes[f"{ref}/without_pyc"] = (args.python, python_paths(code_dir, without, runtime), "bench", body)

    for key, result in measure_all(probes, args.runs).items():
        row, variant = key.split("/")
        (functions if row in functions else references)[row][variant] = result

    first: dict[str, Any] = {}
    if not args.no_first:  # what the import defers, the first invocation pays (bench/coldstart_first.py)
        paths = {fn: python_paths(info["code"], info["layers"], runtime) for fn, info in layout.items()}
        first = measure_first(args.python, stub_env(), paths, WORK, args.runs)

    checks: dict[str, bool] = {}
    for fn in MUST_NOT_LOAD_KUBERNETES:
        loaded = functions[fn]["with_pyc"].get("kubernetes_in_sys_modules")
        checks[f"{fn}: kubernetes not in sys.modules"] = loaded is False
    for fn, data in functions.items():
        checks[f"{fn}: imports cleanly"] = (
            "error" not in data["with_pyc"] and "error" not in data["without_pyc"]
        )
        checks[f"{fn}: <= {LAMBDA_UNZIPPED_LIMIT_MB:.0f} MB unzipped"] = (
            data["unzipped_mb"] <= LAMBDA_UNZIPPED_LIMIT_MB
        )
    # The handlers import the kubernetes client lazily (first record): a layer missing one of its
    # dependencies shows only here, so a reference that does not import fails the benchmark.
    for ref, data in references.items():
        checks[f"{ref}: imports cleanly"] = (
            "error" not in data["with_pyc"] and "error" not in data["without_pyc"]
        )

    checks |= {f"{fn}: first invocation answers": "error" not in data for fn, data in first.items()}
    report = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": version,
        "host": f"{platform.system()} {platform.machine()}",
        "runs": args.runs,
        "method": "fresh `python -S` per run, PYTHONDONTWRITEBYTECODE=1, import app timed with perf_counter "
        "(and its CPU with process_time); first_change: import app and the Kubernetes client its first "
        "change imports; PYTHONPATH = function dir, layers' python dirs, runtime boto3",
        "artifacts": artifacts,
        "functions": functions,
        "first_invocation": first,
        "references": references,
        "checks": checks,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print_table(report)
    return 0 if all(checks.values()) else 1


def _fmt(m: dict[str, Any], key: str) -> str:
    return "ERROR" if "error" in m else f"{m[key] * 1000:7.0f}"


def print_table(report: dict[str, Any]) -> None:
    print(f"python {report['python']} on {report['host']}, best/median of {report['runs']} fresh processes\n")
    header = (
        f"{'function':<18}{'layers':<28}{'MB':>7}{'noPYC':>8}{'zipMB':>7}"
        f"{'import ms pyc best/med':>25}{'no pyc best/med':>19}{'k8s':>6}"
    )
    print(header)
    print("-" * len(header))
    for fn, d in report["functions"].items():
        w, wo = d["with_pyc"], d["without_pyc"]
        zipped = "" if d["zipped_mb"] is None else f"{d['zipped_mb']:7.1f}"
        k8s = "err" if "error" in w else str(w["kubernetes_in_sys_modules"]).lower()
        print(
            f"{fn:<18}{'+'.join(d['layers']):<28}{d['unzipped_mb']:7.1f}{d['unzipped_no_pyc_mb']:8.1f}{zipped:>7}"
            f"{_fmt(w, 'import_best_s'):>17} /{_fmt(w, 'import_median_s')}"
            f"{_fmt(wo, 'import_best_s'):>11} /{_fmt(wo, 'import_median_s')}{k8s:>6}"
        )
    for ref, d in report["references"].items():
        w, wo = d["with_pyc"], d["without_pyc"]
        k8s = "err" if "error" in w else str(w["kubernetes_in_sys_modules"]).lower()
        print(
            f"{ref:<18}{'+'.join(d['layers']):<28}{'':>7}{'':>8}{'':>7}"
            f"{_fmt(w, 'import_best_s'):>17} /{_fmt(w, 'import_median_s')}"
            f"{_fmt(wo, 'import_best_s'):>11} /{_fmt(wo, 'import_median_s')}{k8s:>6}"
        )
    for fn, d in report["functions"].items():
        if "first_change" in d and "error" not in d["first_change"]:
            f = d["first_change"]
            print(
                f"{fn}: with the Kubernetes client its first change imports: {_fmt(f, 'import_best_s')} /"
                f"{_fmt(f, 'import_median_s')} ms ({f['import_cpu_median_s'] * 1000:.0f} ms CPU)"
            )
    if report["first_invocation"]:
        print_first(report["first_invocation"])
    print()
    for fn, d in [*report["functions"].items(), *report["references"].items()]:
        for variant in ("with_pyc", "without_pyc"):
            if "error" in d[variant]:
                print(f"{fn} ({variant}) failed to import:")
                for line in d[variant]["error"]:
                    print(f"    {line}")
    for name, ok in report["checks"].items():
        print(f"{'OK  ' if ok else 'FAIL'} {name}")
    print(f"\nwritten {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    raise SystemExit(main())
