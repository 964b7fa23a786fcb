"""`tagpin doctor` on what the operator's own credentials cannot show: a secret the operator may not
read (Secrets Manager's AccessDenied is worded as a denial, not as "create it"), and a cross-account
ECR role (``registries.<host>.ecr.role_arn``) the functions may not assume because the stack's
``RegistryRoleArns`` does not list it. IAM's policy simulator is answered by the IAM model of
template.yaml (tests/support/iam.py): the functions' roles as the template defines them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import botocore.client
import pytest
from botocore.exceptions import ClientError
from tagpin import wiring
from tagpin.domain.config import parse_config
from tagpin_cli import doctor, doctor_registries, doctor_secrets
from tagpin_cli.doctor import Seat, Status
from tagpin_cli.environment import Stack

from tests.support.iam import ACCOUNT, Request
from tests.support.iamroles import role
from tests.unit.test_doctor_aws import Fake, deployed

REGISTRY = "210987654321.dkr.ecr.eu-west-1.amazonaws.com"
REGISTRY_ROLE = "arn:aws:iam::210987654321:role/tagpin-registry-prod"
CONFIG = f"""
registries:
  {REGISTRY}: {{ecr: {{role_arn: "{REGISTRY_ROLE}"}}}}
images: []
"""
# what the functions' roles are named after (tests/support/iam.py: the ARNs in their policies)
ENVIRONMENT = {"TAGPIN_CONFIG_PARAMETER": "/tagpin/config", "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook"}


def seat_with(config: str, **changes: Any) -> Seat:
    seat = Seat(Stack(**{**deployed().__dict__, **changes}), config=parse_config(config, source="test"))
    seat.roles = {f: f"arn:aws:iam::{ACCOUNT}:role/{f}" for f in doctor.FUNCTIONS}
    return seat


@pytest.fixture
def simulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """``iam:SimulatePrincipalPolicy`` answered from template.yaml's roles, deployed with the
    parameters the test puts in the mapping yielded."""
    parameters: dict[str, str] = {}

    def simulate(PolicySourceArn: str, ActionNames: list[str], ResourceArns: list[str]) -> dict[str, Any]:
        function = PolicySourceArn.rsplit("/", 1)[1]
        allowed = role(function, ENVIRONMENT, parameters).allowed(Request(ActionNames[0], ResourceArns[0]))
        return {"EvaluationResults": [{"EvalDecision": "allowed" if allowed else "implicitDeny"}]}

    monkeypatch.setattr(
        wiring, "aws", lambda service: {"iam": Fake(simulate_principal_policy=simulate)}[service]
    )
    yield parameters


def roles_rows(seat: Seat) -> dict[str, doctor.Result]:
    return {r.subject: r for r in doctor_registries.check_registries(seat)}


def test_a_registry_role_the_stack_does_not_list_fails_naming_the_parameter(simulator):
    """An update from the template that granted iam::*:role/tagpin-registry-*: RegistryRoleArns is
    empty, so no function may assume the role any more."""
    (row,) = roles_rows(seat_with(CONFIG)).values()
    assert row.subject == f"{REGISTRY}: {REGISTRY_ROLE}" and row.status is Status.FAIL
    assert row.detail.startswith("poller, webhook, reconciler, consumer may not assume it (sts:AssumeRole")
    assert "RegistryRoleArns" in row.fix and REGISTRY_ROLE in row.fix

    simulator["RegistryRoleArns"] = REGISTRY_ROLE  # listed: every reader may assume it
    (row,) = roles_rows(seat_with(CONFIG)).values()
    assert row.status is Status.OK and "assumable by poller, webhook, reconciler, consumer" in row.detail

    simulator["RegistryRoleArns"] = "arn:aws:iam::210987654321:role/tagpin-registry-*"  # one account's
    assert next(iter(roles_rows(seat_with(CONFIG)).values())).status is Status.OK


def test_a_registry_role_not_checked_when_the_simulator_is_denied_or_locally(monkeypatch):
    def refused(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "SimulatePrincipalPolicy")

    monkeypatch.setattr(wiring, "aws", lambda service: Fake(simulate_principal_policy=refused))
    (row,) = roles_rows(seat_with(CONFIG)).values()
    assert row.status is Status.WARN and "iam:SimulatePrincipalPolicy" in row.fix
    (row,) = roles_rows(seat_with(CONFIG, aws_endpoint="http://127.0.0.1:1")).values()
    assert row.status is Status.SKIP and "no IAM" in row.detail
    assert roles_rows(seat_with("images: []\n")) == {}  # no role configured: nothing to check


def test_a_secret_the_operator_may_not_read_is_not_said_to_be_missing(aws, monkeypatch):
    """Secrets Manager answers AccessDenied to an operator without secretsmanager:GetSecretValue:
    the doctor says so, and what to check, rather than "does not exist: create it"."""
    monkeypatch.setenv("TAGPIN_SECRET_STORE", "secretsmanager")
    wiring.reset()
    make_api_call = botocore.client.BaseClient._make_api_call

    def denied(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "GetSecretValue":
            error = {"Code": "AccessDeniedException", "Message": "User: operator is not authorized"}
            raise ClientError({"Error": error}, operation)
        return make_api_call(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", denied)
    try:
        seat = seat_with("images: []\n", secret_store="secretsmanager")
        (webhook,) = doctor_secrets.check_secrets(seat)
    finally:
        wiring.reset()
    assert webhook.subject == "tagpin/webhook" and webhook.status is Status.FAIL
    assert webhook.detail == "webhook credentials: not readable with your credentials (AccessDenied)"
    assert webhook.fix.startswith("check your permission (secretsmanager:GetSecretValue, kms:Decrypt")
    assert "KMS key policy" in webhook.fix and "does not exist" not in webhook.detail
