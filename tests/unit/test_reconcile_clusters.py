"""The cluster adapter's credentials (EKS token regeneration, assumed roles, service-account secrets)
and the RBAC manifest against what the code calls. What the adapter does with a real API server
(paged LISTs, imageIDs, 401 and 403, patches, conflicts) is tests/integration/test_kube_adapter.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from botocore.credentials import Credentials
from kubernetes.client import Configuration
from tagpin.adapters.kubernetes.auth import TOKEN_LIFETIME_S, TOKEN_MARGIN_S, EksToken, aws_credentials
from tagpin.adapters.kubernetes.clusters import ClusterConnector
from tagpin.domain.config import parse_config
from tagpin.domain.kinds import PROFILES
from tagpin.ports.workloads import Unreachable

from tests.support.clock import FakeClock
from tests.support.constants import ROOT

RBAC = ROOT / "docs" / "rbac.yaml"


@pytest.mark.parametrize(
    ("secret", "match"),
    [
        ({"token": "t"}, "no 'endpoint'"),
        ({"endpoint": "https://127.0.0.1:1"}, "no 'token'"),
        ([], "not a JSON object"),
    ],
)
def test_malformed_service_account_secrets_are_unreachable(secret, match):
    config = parse_config("clusters:\n  lab: {service_account: {secret: tagpin/clusters/lab}}\n")
    connector = ClusterConnector(lambda: config, lambda _name: json.dumps(secret))
    with pytest.raises(Unreachable, match=match):
        connector("lab")


def test_service_account_ca_may_be_pem_or_base64(tmp_path):
    from tagpin.adapters.kubernetes.auth import service_account_api_client

    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    for ca in (pem, base64.b64encode(pem.encode()).decode()):
        api = service_account_api_client({"endpoint": "https://10.0.0.1", "token": "t", "ca.crt": ca})
        assert Path(api.configuration.ssl_ca_cert).read_text() == pem
        assert api.configuration.api_key["authorization"] == "t"


# -- EKS ---------------------------------------------------------------------------------------------


def _decoded(token: str) -> str:
    assert token.startswith("k8s-aws-v1.")
    body = token.removeprefix("k8s-aws-v1.")
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def test_eks_token_is_presigned_and_regenerated_before_it_expires(aws_env):
    clock = FakeClock(1000.0)
    hook = EksToken("prod", Credentials("AKIDEXAMPLE", "secret"), "eu-west-1", clock=clock)
    configuration = Configuration(host="https://example.invalid")
    hook(configuration)
    first = configuration.api_key["authorization"]
    url = urlsplit(_decoded(first))
    query = parse_qs(url.query)
    assert url.netloc == "sts.eu-west-1.amazonaws.com"
    assert query["Action"] == ["GetCallerIdentity"] and query["X-Amz-Expires"] == ["60"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0]
    assert configuration.api_key["BearerToken"] == first
    clock.advance(TOKEN_LIFETIME_S - TOKEN_MARGIN_S - 1)
    hook(configuration)
    assert hook.generated == 1  # still valid: not regenerated on every request
    clock.advance(2)
    hook(configuration)
    assert hook.generated == 2  # a minute before EKS stops honouring it: a new one


def test_a_cluster_role_is_assumed_with_refreshing_credentials(aws):
    credentials = aws_credentials("arn:aws:iam::123456789012:role/tagpin-cluster")
    assert credentials.method == "assume-role"
    frozen = credentials.get_frozen_credentials()  # fetched from STS (moto) on first use
    source = aws_credentials(None)  # the function's own credentials, as the environment gives them
    assert source.method != "assume-role"
    assert frozen.access_key and frozen.access_key != source.get_frozen_credentials().access_key


# -- RBAC --------------------------------------------------------------------------------------------


def _rules() -> dict[str, set[tuple[str, str, str]]]:
    roles: dict[str, set[tuple[str, str, str]]] = {}
    for doc in yaml.safe_load_all(RBAC.read_text()):
        if doc["kind"] == "ClusterRole":
            roles[doc["metadata"]["name"]] = {
                (group, resource, verb)
                for rule in doc["rules"]
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    return roles


def test_rbac_is_exactly_what_the_code_calls():
    kinds = {(p.group, p.plural) for p in PROFILES}  # the adapter addresses every kind by its profile
    assert ("apps", "deployments") in kinds and ("argoproj.io", "rollouts") in kinds
    roles = _rules()
    # the reconciler patches only to put back what an interrupted patch replaced under a hold
    # (tagpin.usecases.interrupted)
    assert roles["tagpin-reconciler"] == {(g, r, v) for g, r in kinds for v in ("get", "list", "patch")} | {
        ("", "pods", "list")
    }
    # the consumer may also list nodes: what platforms they run, for the platform gate (it falls back
    # to the cluster's configured platforms where it may not)
    assert roles["tagpin-consumer"] == {(g, r, v) for g, r in kinds for v in ("get", "patch")} | {
        ("", "nodes", "list")
    }
