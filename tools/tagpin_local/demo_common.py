"""What the demo's scenarios share (:mod:`tagpin_local.demo`): the rollout they configure, its
deadline, and waiting on a condition within it."""

from __future__ import annotations

import time
from typing import Any

DEADLINE_S = 30.0
SOAK_S = 3
ROLLOUT = {
    "verify_interval_seconds": 1,
    "verify_timeout_seconds": 30,
    "soak_seconds": SOAK_S,
    "waves": [{"name": "stage", "clusters": ["local", "stage"]}, {"name": "prod", "clusters": ["prod"]}],
}
SHOP = ("stage/shop/Deployment/shop/shop", "prod/shop/Deployment/shop/shop")


def wait(what: str, condition: Any) -> float:
    started = time.monotonic()
    while time.monotonic() - started < DEADLINE_S:
        if condition():
            return time.monotonic() - started
        time.sleep(0.02)
    raise SystemExit(f"FAILED: {what} did not happen within {DEADLINE_S:.0f} s")
