"""Cluster connections: credentials never leak into errors."""

from __future__ import annotations

import pytest


def test_a_malformed_kubeconfig_secret_is_never_quoted() -> None:
    from tagpin.adapters.kubernetes.clusters import ClusterConnector
    from tagpin.domain.config import parse_config
    from tagpin.ports.workloads import Unreachable

    config = parse_config("clusters: {lab: {kubeconfig: {secret: tagpin/clusters/lab}}}")
    secret = "users:\n- user:\n    token: SECRETTOKEN123: {bad\n"
    connector = ClusterConnector(lambda: config, lambda _name: secret)
    with pytest.raises(Unreachable) as caught:
        connector("lab")
    assert "SECRETTOKEN123" not in str(caught.value)
    assert "unusable credentials" in str(caught.value)
