"""What tagpin costs to run: API calls per operation, measured through the real handlers, priced.

For N followed tags (default 100, 1,000, 10,000; one label-discovered target each) the local stack
runs a steady-state poll, one change end to end (poll or webhook, consumer, its rollout verification) and a
steady-state reconcile through the real handlers; each operation's AWS calls, registry and
Kubernetes requests, handler time and log bytes are counted, and a monthly cost is computed from
them at the template's defaults and a price table kept here (docs/cost.md describes the method).

By concern:

  drive   ``world.py``      the tags, workloads and state the scenarios run in (not measured)
          ``scenarios.py``  one size N through the real handlers: poll, one change, reconcile
          ``clone.py``      per-tag state written by the real calls for two, copied for the rest
  count   ``awscalls.py``   every AWS API call, with DynamoDB's request units
          ``meter.py``      one operation: AWS calls, registry/Kubernetes requests, time, log bytes
          ``faults.py``     every 5xx/throttling answer of the AWS endpoint, retried or not
  price   ``prices.py``     list prices, free tier, hours per month
          ``defaults.py``   the template's defaults (schedules, memory sizes, alarms, retention)
          ``model.py``      the monthly model
  print   ``report.py``     bench/results/cost.json and the table
          ``__main__.py``   the command line

Usage (from the repository root):
  .venv/bin/python -m bench.cost [--sizes 100,1000,10000] [--changes-per-1000-per-day 20]
      [--reconcile-max 1000] [--clusters 1] [--registries-with-credentials 0]
      [--secret-store ssm|secretsmanager] [--from-results]
      [--results bench/results/cost.json] [--reconcile-from bench/results/cost.json]
Writes bench/results/cost.json (or --results: a partial run such as ``--sizes 100`` belongs
elsewhere, e.g. ``--results /tmp/cost-100.json``) and prints a table. A size above
``--reconcile-max`` scales the largest reconcile measured in the same run, or, when the run measured
none (``--sizes 10000`` alone), the largest in the stored results ``--reconcile-from`` names; the
output and the record (``reconcile_basis_from``) say which run it came from.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "layers" / "common"), str(ROOT / "tools")]
