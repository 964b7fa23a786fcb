"""Credentials per registry kind: secrets by kind, ECR tokens through moto (cached, cross-account)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from tagpin.adapters.registry.credentials import (
    GAR_KEY_USER,
    GAR_TOKEN_USER,
    CredentialsError,
    CredentialStore,
    EcrKey,
    EcrTokens,
    secret_credentials,
)
from tagpin.domain.config import RegistryKind, parse_config, registry_kind
from tagpin.ports.registry import Credentials

from tests.support.clock import FakeClock

ECR_HOST = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
SA_KEY = {
    "type": "service_account",
    "client_email": "tagpin@p.iam.gserviceaccount.com",
    "private_key": "-----",
}


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("docker.io", RegistryKind.DOCKERHUB),
        ("registry-1.docker.io", RegistryKind.DOCKERHUB),
        ("ghcr.io", RegistryKind.GHCR),
        ("quay.io", RegistryKind.QUAY),
        ("acme.azurecr.io", RegistryKind.ACR),
        ("europe-west1-docker.pkg.dev", RegistryKind.GAR),
        ("eu.gcr.io", RegistryKind.GAR),
        (ECR_HOST, RegistryKind.ECR),
        ("registry.example.com:5000", RegistryKind.GENERIC),
        ("127.0.0.1:5000", RegistryKind.GENERIC),
    ],
)
def test_kind_from_host(host: str, kind: RegistryKind) -> None:
    assert registry_kind(host) is kind


def test_secret_shapes_by_kind() -> None:
    basic = {"username": "org+robot", "password": "pw"}
    for kind in (RegistryKind.GENERIC, RegistryKind.QUAY, RegistryKind.ACR, RegistryKind.GHCR):
        assert secret_credentials(kind, basic, "s") == Credentials("org+robot", "pw")
    assert secret_credentials(
        RegistryKind.DOCKERHUB, {"username": "me", "token": "dckr_pat"}, "s"
    ) == Credentials("me", "dckr_pat")
    key = secret_credentials(RegistryKind.GAR, SA_KEY, "s")
    assert key.username == GAR_KEY_USER and json.loads(key.password) == SA_KEY
    assert secret_credentials(RegistryKind.GAR, {"_json_key": SA_KEY}, "s").username == GAR_KEY_USER
    assert secret_credentials(RegistryKind.GAR, {"access_token": "ya29.x"}, "s") == Credentials(
        GAR_TOKEN_USER, "ya29.x"
    )
    with pytest.raises(CredentialsError, match="has: pass, user") as info:
        secret_credentials(RegistryKind.QUAY, {"user": "x", "pass": "hunter2"}, "tagpin/registries/q")
    assert "hunter2" not in str(info.value)


def test_config_registry_fields_and_defaults() -> None:
    config = parse_config(
        f"""
registries:
  docker.io: {{credentials_secret: tagpin/registries/hub}}
  registry.local:5000: {{insecure: true}}
  mirror.internal: {{kind: ecr, ecr: {{region: eu-west-1, role_arn: "arn:aws:iam::210987654321:role/pull"}}}}
  {ECR_HOST}: {{max_concurrency: 8, ignore_attestation_changes: true}}
"""
    )
    assert config.registry("docker.io").head_only_for("docker.io") is True
    assert config.registry("registry.local:5000").head_only_for("registry.local:5000") is False
    assert config.registry("registry.local:5000").credentials_secret is None
    assert config.registry("mirror.internal").kind_for("mirror.internal") is RegistryKind.ECR
    assert config.registry(ECR_HOST).max_concurrency == 8
    with pytest.raises(ValueError, match=r"registries\.mirror\.internal\.ecr\.region: required"):
        parse_config("registries:\n  mirror.internal: {kind: ecr}\n")


def test_store_reads_secrets_lazily_per_registry() -> None:
    config = parse_config(
        """
registries:
  docker.io: {credentials_secret: tagpin/registries/hub}
  europe-docker.pkg.dev: {credentials_secret: tagpin/registries/gar}
  broken.example.com: {credentials_secret: tagpin/registries/broken}
"""
    )
    secrets = {
        "tagpin/registries/hub": {"username": "me", "password": "pat"},
        "tagpin/registries/gar": {"_json_key": SA_KEY},
    }
    read: list[str] = []

    def secret_json(name: str) -> dict[str, Any]:
        read.append(name)
        return secrets[name]

    store = CredentialStore(lambda: config, secret_json)
    hub = store.access("docker.io")
    assert (hub.credentials, hub.head_only) == (Credentials("me", "pat"), True)
    assert read == ["tagpin/registries/hub"]
    assert store.access("europe-docker.pkg.dev").credentials.username == GAR_KEY_USER  # type: ignore[union-attr]
    assert store.access("anonymous.example.com").credentials is None
    with pytest.raises(KeyError):
        store.access("broken.example.com")


def test_ecr_token_through_moto_is_cached(aws: None) -> None:
    calls: list[tuple[str, str | None]] = []

    def client(region: str, role_arn: str | None) -> Any:
        calls.append((region, role_arn))
        return boto3.client("ecr", region_name=region)

    tokens = EcrTokens(client, clock=FakeClock(1_000_000.0))
    config = parse_config(f"registries:\n  {ECR_HOST}: {{}}\n")
    store = CredentialStore(lambda: config, lambda _n: {}, tokens)
    access = store.access(ECR_HOST)
    assert access.credentials is not None and access.credentials.username == "AWS"
    assert access.credentials.password  # moto's token: base64("AWS:<password>") decoded
    assert calls == [("eu-west-1", None)]
    store.access(ECR_HOST)
    assert tokens.fetches == 1  # cached
    assert access.invalidate is not None
    access.invalidate()  # the registry rejected it: ask again
    store.access(ECR_HOST)
    assert tokens.fetches == 2


def test_ecr_cache_lasts_most_of_twelve_hours() -> None:
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC).timestamp())

    class FakeEcr:
        def get_authorization_token(self) -> dict[str, Any]:
            return {
                "authorizationData": [
                    {
                        "authorizationToken": "QVdTOnNlY3JldA==",  # AWS:secret
                        "expiresAt": datetime.fromtimestamp(clock.now, UTC) + timedelta(hours=12),
                    }
                ]
            }

    tokens = EcrTokens(lambda _r, _a: FakeEcr(), clock=clock)
    key = EcrKey("123456789012", "eu-west-1", None)
    assert tokens.get(key) == Credentials("AWS", "secret")
    clock.advance(10.9 * 3600)
    tokens.get(key)
    assert tokens.fetches == 1
    clock.advance(0.2 * 3600)  # 11.1 h: within the last hour, fetch a fresh one
    tokens.get(key)
    assert tokens.fetches == 2
    tokens.get(EcrKey("123456789012", "us-east-1", None))  # another region: its own token
    assert tokens.fetches == 3


def test_ecr_cross_account_role_through_moto_sts(aws: None) -> None:
    from tagpin import wiring

    wiring.aws.cache_clear()
    role = "arn:aws:iam::210987654321:role/tagpin-pull"
    tokens = EcrTokens(wiring.ecr_client)
    config = parse_config(f"registries:\n  {ECR_HOST}: {{ecr: {{role_arn: '{role}'}}}}\n")
    access = CredentialStore(lambda: config, lambda _n: {}, tokens).access(ECR_HOST)
    assert access.credentials is not None and access.credentials.username == "AWS"
    wiring.aws.cache_clear()
