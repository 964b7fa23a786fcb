"""The webhook and the poller carry only what they use (docs/architecture.md, Packaging): their
handler modules, loaded as on a cold start, have not imported the kubernetes client, nor the
packages whose import cost them cold start for nothing: powertools' ``event_handler`` (AppSync,
Bedrock, OpenAPI; the webhook's one route is matched by ``tagpin.adapters.http_api``) and
pydantic-settings (``tagpin.settings`` reads the environment itself). Each runs in a process of
its own: the test process has loaded everything. ``make bench-coldstart`` times the same import."""

from __future__ import annotations

import pytest

from tests.support.constants import ROOT
from tests.support.fresh import run_fresh

SCRIPT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)
assert callable(app.lambda_handler)
print(json.dumps(sorted(sys.modules)))
"""
NEVER = {
    "kubernetes": "the Kubernetes client (the consumer's and the reconciler's layer)",
    "aws_lambda_powertools.event_handler": "powertools' HTTP resolvers (AppSync, Bedrock, OpenAPI)",
    "pydantic_settings": "pydantic-settings (tagpin.settings reads the environment itself)",
    "jinja2": "the console's renderer",
    "dulwich": "the Git client (the write-back function's layer)",
    "sigstore": "signature checks (the consumer's)",
    "tagpin.gitwiring": "the write-back function's composition root",
    "tagpin.console": "the console's routes",
}


def loaded_modules(function: str) -> set[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT / "layers/common"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
        "TAGPIN_STATE_TABLE": "tagpin-state",
        "TAGPIN_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/changes.fifo",
        "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook",
        "POWERTOOLS_SERVICE_NAME": function,
    }
    return set(run_fresh(SCRIPT, ROOT / "functions" / function / "app.py", env))


@pytest.mark.parametrize("function", ["webhook", "poller"])
def test_the_function_imports_only_what_it_uses(function: str) -> None:
    loaded = loaded_modules(function)
    assert {"tagpin.wiring", "tagpin.settings", "aws_lambda_powertools.logging"} <= loaded
    imported = {
        name: why for name, why in NEVER.items() if any(m == name or m.startswith(name + ".") for m in loaded)
    }
    assert not imported, f"the {function} function imported {imported}"
