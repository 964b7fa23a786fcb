"""EMF metrics per registry: errors by host and the rate limit a registry reports."""

from __future__ import annotations

import json

from tagpin.domain.outcomes import Observation, TagOutcome
from tagpin.observability import registry_metrics


def emf_blobs(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"_aws"' in line]


def test_registry_errors_by_host_and_rate_limit_remaining(capsys, monkeypatch):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    results = [
        Observation("ghcr.io/a/b:1", TagOutcome.ERROR, error="down"),
        Observation("ghcr.io/a/c:1", TagOutcome.ERROR, error="down"),
        Observation("quay.io/a/b:1", TagOutcome.CHANGED),
    ]
    registry_metrics(results, {"registry-1.docker.io": {"ratelimit-remaining": "95;w=21600"}, "x": {}})
    blobs = emf_blobs(capsys.readouterr().out)
    errors = [b for b in blobs if "RegistryErrors" in b]
    assert [(b["registry"], b["RegistryErrors"]) for b in errors] == [("ghcr.io", [2.0])]
    (limit,) = [b for b in blobs if "RateLimitRemaining" in b]
    assert limit["registry"] == "registry-1.docker.io" and limit["RateLimitRemaining"] == [95.0]
    assert limit["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "tagpin"
