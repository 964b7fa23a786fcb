"""The webhook and the poller carry only what they use (docs/architecture.md, Packaging): their
handler modules, loaded as on a cold start, have not imported the kubernetes client, nor the
packages whose import cost them cold start for nothing: powertools' ``event_handler`` (AppSync,
Bedrock, OpenAPI; the webhook's one route is matched by ``tagpin.adapters.http_api``) and
pydantic-settings (``tagpin.settings`` reads the environment itself). Nor what their first
invocation imports when it first needs it (``tagpin.wiring``'s factories import what they build):
the configuration's and the domain's pydantic models, the senders' payload models, the state
table's adapters, the registry client and its event loop, YAML, boto3 and the use cases. pydantic
itself is loaded, for one model: the settings, validated when the module loads. Each runs in a
process of its own: the test process has loaded everything. ``make bench-coldstart`` times the
same import, and the first invocation after it."""

from __future__ import annotations

import pytest

from tests.support.constants import ROOT
from tests.support.fresh import handler_env, run_fresh

SCRIPT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)
assert callable(app.lambda_handler)
models = []
if "pydantic" in sys.modules:
    pending = [sys.modules["pydantic"].BaseModel]
    while pending:
        for model in pending.pop().__subclasses__():
            models.append(f"{model.__module__}.{model.__qualname__}")
            pending.append(model)
print(json.dumps({"modules": sorted(sys.modules), "models": sorted(models)}))
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
    # Imported by the first invocation that needs them (issue 26: webhook 212 ms, poller 205 ms
    # at the import before; bench/coldstart_first.py prints what that first invocation pays):
    "tagpin.domain.config": "the configuration's models (pydantic; loaded with the configuration)",
    "tagpin.domain.model": "the base of the domain's pydantic models",
    "tagpin.adapters.webhooks": "the senders' payload models (pydantic)",
    "tagpin.adapters.dynamodb": "the state table's adapters",
    "tagpin.adapters.registry": "the registry client",
    "asyncio": "the registry client's event loop",
    "aiohttp": "the registry client's HTTP",
    "yaml": "the configuration's parser",
    "boto3": "the AWS SDK (the first client)",
    "tagpin.usecases": "the use cases (their factories in tagpin.wiring import them)",
}


def loaded(function: str) -> dict[str, list[str]]:
    env = handler_env(function)
    result: dict[str, list[str]] = run_fresh(SCRIPT, ROOT / "functions" / function / "app.py", env)
    return result


@pytest.mark.parametrize("function", ["webhook", "poller"])
def test_the_function_imports_only_what_it_uses(function: str) -> None:
    modules = set(loaded(function)["modules"])
    assert {"tagpin.wiring", "tagpin.settings", "aws_lambda_powertools.logging"} <= modules
    imported = {
        name: why
        for name, why in NEVER.items()
        if any(m == name or m.startswith(name + ".") for m in modules)
    }
    assert not imported, f"the {function} function imported {imported}"


@pytest.mark.parametrize("function", ["webhook", "poller"])
def test_the_only_pydantic_model_built_at_import_is_the_settings(function: str) -> None:
    """Each model class costs its schema build when its module loads (the configuration's thirty
    cost the webhook about 80 ms): at import only the settings are validated, so only their model
    is built; pydantic's import (about 20 ms) is what the environment check costs."""
    assert loaded(function)["models"] == ["tagpin.settings.Settings"]
