"""Secrets read by name through the composition root (``tagpin.wiring.secret_text`` / ``secret_json``)
from either store the template's ``SecretStore`` chooses, moto in-process: an SSM SecureString
parameter ``/`` + name (the default) and a Secrets Manager secret of the name. Callers pass the same
name and get the same value; only the store the stack chose is asked."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from tagpin import wiring
from tagpin.adapters.secrets import SecretNotFound, Secrets, parameter_name, stored_name
from tagpin.settings import SecretStore, Settings, SettingsError

from tests.support.constants import REGION

KUBECONFIG = "apiVersion: v1\nkind: Config\nusers: [{name: lab, user: {token: s3cr3t-token}}]\n"
CREDENTIALS = {"username": "robot", "password": "pa55-word"}
STORES = [s.value for s in SecretStore]
SDK = ("botocore", "boto3", "urllib3")


class Calls:
    """Every read made through any botocore client (powertools builds its own): service, operation,
    parameters."""

    def __init__(self) -> None:
        self.made: list[tuple[str, str, dict[str, Any]]] = []


def put(store: str, name: str, value: str) -> None:
    """A secret as the operator creates it (docs/deploying.md)."""
    if store == "ssm":
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name="/" + name, Value=value, Type="SecureString", Tier="Standard"
        )
    else:
        boto3.client("secretsmanager", region_name=REGION).create_secret(Name=name, SecretString=value)


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto in-process, TAGPIN_SECRET_STORE set to the store, a fresh composition root."""
    monkeypatch.setenv("TAGPIN_SECRET_STORE", request.param)
    wiring.reset()
    yield str(request.param)
    wiring.reset()


@pytest.fixture
def calls(store: str, monkeypatch: pytest.MonkeyPatch) -> Calls:
    import botocore.client

    recorded = Calls()
    make_api_call = botocore.client.BaseClient._make_api_call

    def recording(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation.startswith("Get"):  # the reads (not the test's own puts)
            recorded.made.append((client.meta.service_model.service_name, operation, dict(params)))
        return make_api_call(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    return recorded


def test_the_default_store_is_ssm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAGPIN_SECRET_STORE", raising=False)
    assert Settings.from_env().secret_store is SecretStore.SSM
    monkeypatch.setenv("TAGPIN_SECRET_STORE", "vault")
    with pytest.raises(SettingsError, match="TAGPIN_SECRET_STORE: Input should be 'ssm' or 'secretsmanager'"):
        Settings.from_env()


def test_one_name_per_secret() -> None:
    assert parameter_name("tagpin/clusters/prod") == "/tagpin/clusters/prod"
    assert stored_name(SecretStore.SSM, "tagpin/webhook") == "/tagpin/webhook"
    assert stored_name(SecretStore.SECRETS_MANAGER, "tagpin/webhook") == "tagpin/webhook"
    assert Secrets(SecretStore.SSM).where("tagpin/x") == "SSM parameter /tagpin/x"
    assert Secrets(SecretStore.SECRETS_MANAGER).where("tagpin/x") == "Secrets Manager secret tagpin/x"


def test_a_secret_is_read_by_name_from_the_chosen_store(store: str, calls: Calls) -> None:
    put(store, "tagpin/clusters/lab", KUBECONFIG)
    put(store, "tagpin/registries/example", json.dumps(CREDENTIALS))

    assert wiring.secret_text("tagpin/clusters/lab") == KUBECONFIG
    assert wiring.secret_json("tagpin/registries/example") == CREDENTIALS

    reads = [(service, op) for service, op, _ in calls.made]
    if store == "ssm":
        assert reads == [("ssm", "GetParameter")] * 2
        # the SecureString is decrypted: the SSM parameter is "/" + the secret's name
        assert [(p["Name"], p["WithDecryption"]) for _, _, p in calls.made] == [
            ("/tagpin/clusters/lab", True),
            ("/tagpin/registries/example", True),
        ]
    else:
        assert reads == [("secretsmanager", "GetSecretValue")] * 2
        assert [p["SecretId"] for _, _, p in calls.made] == [
            "tagpin/clusters/lab",
            "tagpin/registries/example",
        ]


def test_a_secret_is_cached_per_container(store: str, calls: Calls) -> None:
    """Read once per SECRET_MAX_AGE (5 minutes) per warm container, in either store."""
    put(store, "tagpin/notifications/chat", json.dumps({"slack": "https://hooks.example/T0"}))
    for _ in range(3):
        assert wiring.secret_json("tagpin/notifications/chat") == {"slack": "https://hooks.example/T0"}
    assert len(calls.made) == 1


def test_a_missing_secret_is_named_in_its_store(store: str) -> None:
    with pytest.raises(SecretNotFound) as info:
        wiring.secret_text("tagpin/clusters/gone")
    where = (
        "SSM parameter /tagpin/clusters/gone"
        if store == "ssm"
        else "Secrets Manager secret tagpin/clusters/gone"
    )
    assert str(info.value) == f"the {where} does not exist"


def test_a_secret_that_is_no_json_object_is_refused_without_its_value(store: str) -> None:
    put(store, "tagpin/registries/list", json.dumps(["pa55-word"]))
    with pytest.raises(ValueError, match="is not a JSON object") as info:
        wiring.secret_json("tagpin/registries/list")
    assert "pa55-word" not in str(info.value)


def test_the_store_written_is_the_only_one_read(store: str) -> None:
    """A secret in the other store is not found: the stack reads one store (its role may read no other)."""
    other = "secretsmanager" if store == "ssm" else "ssm"
    put(other, "tagpin/clusters/lab", KUBECONFIG)
    with pytest.raises(SecretNotFound):
        wiring.secret_text("tagpin/clusters/lab")


def test_no_secret_value_is_logged(store: str, caplog: pytest.LogCaptureFixture) -> None:
    put(store, "tagpin/clusters/lab", KUBECONFIG)
    put(store, "tagpin/registries/example", json.dumps(CREDENTIALS))
    with caplog.at_level(logging.DEBUG):
        wiring.secret_text("tagpin/clusters/lab")
        wiring.secret_json("tagpin/registries/example")
        with pytest.raises(SecretNotFound):
            wiring.secret_text("tagpin/clusters/gone")
    # tagpin's and powertools' records (botocore's own DEBUG wire log is off in Lambda)
    ours = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records if not r.name.startswith(SDK))
    for value in ("s3cr3t-token", "pa55-word"):
        assert value not in ours


def test_a_denied_read_is_told_apart_from_a_missing_secret(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Secrets Manager's AccessDenied is ``SecretDenied``: still a ``SecretNotFound`` for callers that
    only need "not there for me" (the webhook's 503), worded as a denial for the doctor. SSM answers
    ParameterNotFound for a missing parameter, so its AccessDenied stays the service's error."""
    import botocore.client
    from aws_lambda_powertools.utilities.parameters import GetParameterError
    from botocore.exceptions import ClientError
    from tagpin.adapters.secrets import SecretDenied

    put(store, "tagpin/clusters/lab", KUBECONFIG)
    make_api_call = botocore.client.BaseClient._make_api_call

    def denied(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation in ("GetSecretValue", "GetParameter"):
            error = {"Code": "AccessDeniedException", "Message": "User: x is not authorized"}
            raise ClientError({"Error": error}, operation)
        return make_api_call(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", denied)
    if store == "ssm":
        with pytest.raises(GetParameterError, match="AccessDeniedException"):
            wiring.secret_text("tagpin/clusters/lab")
        return
    with pytest.raises(SecretDenied) as info:
        wiring.secret_text("tagpin/clusters/lab")
    assert isinstance(info.value, SecretNotFound)
    assert str(info.value).startswith(
        "the Secrets Manager secret tagpin/clusters/lab is not readable: AccessDenied"
    )
    assert "KMS key" in str(info.value) and "does not exist" in str(info.value)
