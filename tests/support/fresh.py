"""A function's handler module loaded in a process of its own, as on a cold start (the test process
has loaded everything): what a script run there prints last, as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.constants import ROOT


def handler_env(function: str) -> dict[str, str]:
    """What a handler's cold start sees: the common layer, the settings every function is given (no
    AWS endpoint that answers), and nothing of the test process's environment."""
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT / "layers/common"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
        "TAGPIN_STATE_TABLE": "tagpin-state",
        "TAGPIN_IDEMPOTENCY_TABLE": "tagpin-idempotency",
        "TAGPIN_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/changes.fifo",
        "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook",
        "TAGPIN_NOTIFICATIONS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/notifications",
        "POWERTOOLS_SERVICE_NAME": function,
    }


def run_fresh(script: str, app: Path, env: dict[str, str]) -> Any:
    """Run ``script`` (``sys.argv[1]`` is ``app``) in a fresh interpreter with only ``env``; its last
    line of output, read as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(app)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
