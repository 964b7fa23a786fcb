"""Work a handler's import does that no invocation uses (issue 26, ``make bench-coldstart``), kept
out of it: pydantic's search for plugins (every distribution's metadata read; tagpin has no
plugins: ``tagpin.settings`` turns it off) and, in the consumer, powertools' parser models, which
powertools' batch builds when pydantic is loaded before it; and the garbage collector's walks of
what the import builds, which all lives as long as the container (``tagpin.wiring.poll_gc``). Each
handler runs in a process of its own: the test process has loaded everything."""

from __future__ import annotations

import pytest

from tests.support.constants import ROOT
from tests.support.fresh import handler_env, run_fresh

# The handler's source is compiled before the count starts: its first line can pause the collector
# only once it runs, and compiling it (on Lambda too: the functions' packages carry no bytecode)
# may reach a collection or not, by what the process did before (CI's first run, without
# __pycache__, did). What is counted is the handler's own import, from its first line.
SCRIPT = """
import gc, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
app = importlib.util.module_from_spec(spec)
code = spec.loader.get_code("app")
gc.collect()
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
exec(code, app.__dict__)
assert callable(app.lambda_handler)
loader = sys.modules.get("pydantic.plugin._loader")
print(json.dumps({
    "plugins_searched": loader is not None and loader._plugins is not None,
    "parser": sorted(m for m in sys.modules if m.startswith("aws_lambda_powertools.utilities.parser")),
    "models_built": "pydantic.plugin._loader" in sys.modules,
    "collections": len(collections),
    "collector_on": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
}))
"""


def loaded(function: str) -> dict[str, object]:
    env = handler_env(function)
    result: dict[str, object] = run_fresh(SCRIPT, ROOT / "functions" / function / "app.py", env)
    return result


@pytest.mark.parametrize("function", ["webhook", "poller", "consumer"])
def test_pydantic_does_not_search_for_plugins(function: str) -> None:
    found = loaded(function)
    assert found["models_built"], "no pydantic model built at the import: nothing to check"
    assert found["plugins_searched"] is False


def test_the_consumer_builds_no_parser_models() -> None:
    assert loaded("consumer")["parser"] == []


@pytest.mark.parametrize("function", ["webhook", "poller", "consumer"])
def test_the_collector_does_not_run_while_the_handler_loads(function: str) -> None:
    found = loaded(function)
    assert found["collections"] == 0
    assert found["collector_on"] is True  # resumed once the modules are loaded
    assert found["frozen"] > 10_000  # what they built is out of the collector's later walks
