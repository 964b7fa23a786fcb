"""The write-back function carries only what it uses: its container, started and its writer built
(the Git client, the state table, the changes queue), has loaded dulwich and not the kubernetes
client, nor the registry client's aiohttp. Run in a process of its own: the test process has
loaded everything."""

from __future__ import annotations

from tests.support.constants import ROOT
from tests.support.fresh import run_fresh

SCRIPT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("writeback_app", sys.argv[1])
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)
from tagpin import gitwiring
gitwiring.writer()
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_the_write_back_function_never_loads_kubernetes() -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
        "TAGPIN_STATE_TABLE": "tagpin-state",
        "TAGPIN_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/changes.fifo",
        "TAGPIN_WRITEBACK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/writeback.fifo",
        "POWERTOOLS_SERVICE_NAME": "writeback",
    }
    loaded = set(run_fresh(SCRIPT, ROOT / "functions/writeback/app.py", env))
    assert "dulwich" in loaded and "tagpin" in loaded
    assert not loaded & {"kubernetes", "aiohttp", "sigstore", "jinja2"}, sorted(loaded)
