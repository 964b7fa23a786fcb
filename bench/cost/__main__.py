"""The command line: measure every size (or reprice the stored measurements), then report.

Usage: see the package's docstring (``bench/cost/__init__.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO, cast

from tagpin_local.lambda_runtime import set_function_output

from .awscalls import AwsCalls
from .faults import ServerErrors
from .meter import LogBytes
from .report import RESULTS, write
from .scenarios import measure_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument(
        "--changes-per-1000-per-day",
        type=float,
        default=20.0,
        help="assumed tag moves per day per 1,000 followed tags (each applied to one target)",
    )
    parser.add_argument(
        "--reconcile-max",
        type=int,
        default=1000,
        help="largest N whose reconcile runs are measured; larger ones are scaled linearly from it "
        "(on 2 cores a reconcile against moto takes about 21 ms per tag)",
    )
    parser.add_argument(
        "--reconcile-from",
        type=Path,
        default=RESULTS,
        help="stored results whose largest measured reconcile a run that measured none scales (e.g. "
        "--sizes 10000 on its own); the run it came from is printed and recorded. Default "
        "bench/results/cost.json",
    )
    parser.add_argument("--poll-runs", type=int, default=3, help="steady polls measured per size")
    parser.add_argument("--clusters", type=int, default=1, help="clusters (one kubeconfig secret each)")
    parser.add_argument("--registries-with-credentials", type=int, default=0)
    parser.add_argument(
        "--secret-store",
        choices=["ssm", "secretsmanager"],
        default=None,
        help="where the secrets live (template parameter SecretStore); default: the template's default",
    )
    parser.add_argument(
        "--esm-receives-per-minute",
        type=float,
        default=15.0,
        help="assumed idle ReceiveMessage calls per minute by Lambda's SQS event source, per queue",
    )
    parser.add_argument(
        "--from-results",
        action="store_true",
        help="recompute the estimate from the stored results (--results)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS,
        help="the results file written (and read by --from-results); default bench/results/cost.json. "
        "Give another one for a partial run (e.g. --sizes 100) so the stored results stay whole",
    )
    args = parser.parse_args()
    if args.from_results:
        doc = json.loads(args.results.read_text())
        write(doc, doc["measured"], args, set(doc["custom_metrics_seen"]), doc["seconds"], args.results)
        if "run" in doc:  # the measuring run's record (bench.runinfo) stays: its figures, estimated again
            fresh = json.loads(args.results.read_text())
            fresh.pop("machine", None)  # the run record has it
            args.results.write_text(json.dumps({"run": doc["run"], **fresh}, indent=2) + "\n")
        return
    # the local controller-manager keeps up with 10,000 workloads created at once (tagpin_local.kube.flags)
    for key, value in {"AWS_EC2_METADATA_DISABLED": "true", "TAGPIN_LOCAL_KUBE_BULK": "1"}.items():
        os.environ.setdefault(key, value)
    logging.getLogger("tagpin.local").setLevel(logging.ERROR)

    calls = AwsCalls()
    calls.install()
    errors = ServerErrors()
    errors.install()
    logs = LogBytes()
    # what the functions print (their EMF metric blobs) and log goes to the local runtime's
    # FUNCTION_OUTPUT, not to this process's stdout: counted there (it went to stderr, uncounted)
    set_function_output(cast(TextIO, logs))
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(logs):
            for n in (int(s) for s in args.sizes.split(",")):
                t0 = time.perf_counter()
                row = measure_size(n, args, calls, logs, errors)
                row["seconds"] = round(time.perf_counter() - t0, 1)
                rows.append(row)
                answers = row["aws_server_errors"]["answers"]
                print(
                    f"N={n}: measured in {row['seconds']}s {row['setup_seconds']}; AWS 5xx/throttling "
                    f"answers (retried by botocore): {answers or 'none'}",
                    file=sys.stderr,
                    flush=True,
                )
                for operation, message in row["aws_server_errors"]["first_message"].items():
                    print(f"  {operation}: first {message}", file=sys.stderr, flush=True)
    finally:
        set_function_output(None)
        errors.uninstall()
        calls.uninstall()
    write({}, rows, args, logs.metrics, round(time.perf_counter() - started, 1), args.results)


if __name__ == "__main__":
    main()
