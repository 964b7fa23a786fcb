"""The KMS key parameters (``KmsKeyArn``, ``SigningKmsKeyArns``) become the ``Resource`` of the
roles' ``kms:Decrypt`` / ``kms:GetPublicKey`` statements, and IAM identifies a KMS key there by its
key ARN only: "you must use its key ARN. You cannot use a key id, alias name, or alias ARN to
identify a KMS key in an IAM policy statement" (AWS KMS developer guide, "Specifying KMS keys in IAM
policy statements"). A value in another form deploys, and then every decryption (each SecureString
parameter or secret under that key: the configuration, the webhook secret, the clusters') or every
public key read is denied at run time. The template should refuse such a value before anything is
deployed, as it refuses other malformed parameters (``AllowedPattern``)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit.template_support import template  # noqa: F401 (the module fixture)

KEY_ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
NOT_KEY_ARNS = [
    "arn:aws:kms:eu-west-1:111122223333:alias/tagpin",  # an alias ARN
    "alias/tagpin",  # an alias name
    "1234abcd-12ab-34cd-56ef-1234567890ab",  # a key id
]


def accepted(parameter: dict[str, Any], value: str) -> bool:
    """Whether CloudFormation accepts ``value`` (for a CommaDelimitedList, each of its items)."""
    pattern = parameter.get("AllowedPattern")
    items = value.split(",") if parameter["Type"] == "CommaDelimitedList" else [value]
    return pattern is None or all(re.fullmatch(pattern, item) for item in items)


@pytest.mark.parametrize("name", ["KmsKeyArn", "SigningKmsKeyArns"])
def test_a_key_arn_and_none_are_accepted(template: dict[str, Any], name: str) -> None:  # noqa: F811
    parameter = template["Parameters"][name]
    assert accepted(parameter, KEY_ARN)
    assert accepted(parameter, parameter["Default"])
    # wildcards where IAM takes them: every key of a region, of every region (the KMS guide)
    assert accepted(parameter, "arn:aws:kms:eu-west-1:111122223333:key/*")
    assert accepted(parameter, "arn:aws:kms:*:111122223333:key/*")
    assert not accepted(parameter, "arn:aws:kms:eu-west-1:111122223333:*")
    if parameter["Type"] == "CommaDelimitedList":
        assert accepted(parameter, f"{KEY_ARN},{KEY_ARN.replace('eu-west-1', 'us-east-1')}")


@pytest.mark.parametrize("value", NOT_KEY_ARNS)
@pytest.mark.parametrize("name", ["KmsKeyArn", "SigningKmsKeyArns"])
def test_a_value_iam_cannot_match_is_refused_before_the_deploy(
    template: dict[str, Any],  # noqa: F811
    name: str,
    value: str,
) -> None:
    assert not accepted(template["Parameters"][name], value)
