"""A function's handler module loaded in a process of its own, as on a cold start (the test process
has loaded everything): what a script run there prints last, as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


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
