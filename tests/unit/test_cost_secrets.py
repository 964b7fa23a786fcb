"""The cost model prices the secrets in the stack's store (bench/cost/model.py): SSM Standard-tier
SecureString parameters (the default) cost nothing a month and their reads are free at standard
throughput; Secrets Manager costs $0.40 per secret a month and $0.05 per 10,000 reads."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from bench.cost.defaults import template_defaults
from bench.cost.model import estimate
from bench.cost.prices import PRICES
from tests.support.cost import measurement, row

ROW = row(
    consumer_one_change=measurement(**{"secretsmanager:GetSecretValue": 1}),
    webhook_one_change=measurement(**{"secretsmanager:GetSecretValue": 1}),
)


def args(store: str | None, clusters: int = 1, registries: int = 2) -> argparse.Namespace:
    return argparse.Namespace(
        changes_per_1000_per_day=20.0,
        clusters=clusters,
        registries_with_credentials=registries,
        esm_receives_per_minute=15.0,
        secret_store=store,
    )


def secret_lines(result: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in result["lines"].items() if "secret" in k}


def test_the_template_default_store_is_priced_when_none_is_given() -> None:
    defaults = template_defaults()
    assert defaults["secret_store"] == "ssm"
    assert estimate(ROW, defaults, args(None), metrics=0)["secret_store"] == "ssm"


def test_ssm_secrets_cost_nothing_a_month() -> None:
    result = estimate(ROW, template_defaults(), args("ssm"), metrics=0)
    lines = secret_lines(result)
    assert lines["fixed: secrets (SSM SecureString)"] == 0.0
    assert lines["fixed: secret reads (SSM SecureString, registry credentials)"] == 0.0
    assert sum(lines.values()) == 0.0


@pytest.mark.parametrize(("clusters", "registries"), [(1, 0), (3, 2)])
def test_secrets_manager_costs_its_secrets_and_reads(clusters: int, registries: int) -> None:
    result = estimate(ROW, template_defaults(), args("secretsmanager", clusters, registries), metrics=0)
    lines = secret_lines(result)
    # the webhook's secret, one kubeconfig per cluster, one per registry with credentials
    assert lines["fixed: secrets (Secrets Manager)"] == round((1 + clusters + registries) * 0.40, 4)
    assert PRICES["secrets_manager_secret_month"] == 0.40
    reads = lines["fixed: secret reads (Secrets Manager, registry credentials)"]
    assert (reads > 0) == (registries > 0)
    ssm = estimate(ROW, template_defaults(), args("ssm", clusters, registries), metrics=0)
    assert ssm["total_usd_month"] < result["total_usd_month"]
