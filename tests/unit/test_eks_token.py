"""EKS tokens are presigned for the cluster's region against that region's STS endpoint, whatever
``AWS_STS_REGIONAL_ENDPOINTS`` and the botocore version would pick by themselves: a token signed
for eu-west-1 but sent to the global endpoint is refused by EKS (401)."""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, urlsplit

import pytest
from botocore.credentials import Credentials
from tagpin.adapters.kubernetes.auth import eks_token, sts_endpoint

CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "session-token")


def decoded(token: str) -> tuple[str, dict[str, list[str]]]:
    assert token.startswith("k8s-aws-v1.")
    body = token.removeprefix("k8s-aws-v1.")
    assert "=" not in body  # base64url without padding, as aws eks get-token writes it
    url = urlsplit(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode())
    return url.netloc, parse_qs(url.query)


@pytest.mark.parametrize("sts_endpoints", ["legacy", "regional", None])
@pytest.mark.parametrize(
    ("region", "host"),
    [
        ("us-east-1", "sts.us-east-1.amazonaws.com"),
        ("eu-west-1", "sts.eu-west-1.amazonaws.com"),
        ("ap-southeast-2", "sts.ap-southeast-2.amazonaws.com"),
        ("cn-north-1", "sts.cn-north-1.amazonaws.com.cn"),
    ],
)
def test_token_is_regional_and_signs_the_cluster_name(
    monkeypatch: pytest.MonkeyPatch, region: str, host: str, sts_endpoints: str | None
) -> None:
    if sts_endpoints is None:
        monkeypatch.delenv("AWS_STS_REGIONAL_ENDPOINTS", raising=False)
    else:
        monkeypatch.setenv("AWS_STS_REGIONAL_ENDPOINTS", sts_endpoints)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # a local endpoint never leaks in
    netloc, query = decoded(eks_token("prod-cluster", CREDENTIALS, region))
    assert netloc == host == urlsplit(sts_endpoint(region)).netloc
    assert query["Action"] == ["GetCallerIdentity"] and query["Version"] == ["2011-06-15"]
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and query["X-Amz-Expires"] == ["60"]
    access_key, _date, signed_region, service, terminator = query["X-Amz-Credential"][0].split("/")
    assert (access_key, signed_region, service, terminator) == ("AKIDEXAMPLE", region, "sts", "aws4_request")
    assert query["X-Amz-SignedHeaders"] == ["host;x-k8s-aws-id"]
    assert query["X-Amz-Security-Token"] == ["session-token"]
    assert len(query["X-Amz-Signature"][0]) == 64


def test_the_cluster_name_is_part_of_the_signature() -> None:
    _, a = decoded(eks_token("prod", CREDENTIALS, "eu-west-1"))
    _, b = decoded(eks_token("stage", CREDENTIALS, "eu-west-1"))
    assert a["X-Amz-Signature"] != b["X-Amz-Signature"]
