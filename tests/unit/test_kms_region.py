"""A signature gate's AWS KMS key is read where it lives: ``kms:GetPublicKey`` in the key ARN's
region (a key in another region than the function's), and an alias ARN refused with what to give
instead (the role is granted GetPublicKey on the key ARNs of SigningKmsKeyArns). The composition
root's trust material (``wiring.trust_material``) on moto, the function in us-east-1."""

from __future__ import annotations

import boto3
import pytest
from pydantic import ValidationError
from tagpin import wiring
from tagpin.domain.config.signatures import PublicKeySource, Signatures
from tagpin.ports.signatures import TrustMaterialError


@pytest.fixture
def material(aws: None):  # type: ignore[no-untyped-def]
    wiring.reset()
    yield wiring.trust_material()
    wiring.reset()


def test_a_key_in_another_region_is_read_in_its_region(material) -> None:  # type: ignore[no-untyped-def]
    far = boto3.client("kms", region_name="eu-west-1")
    key = far.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]
    assert ":eu-west-1:" in key and boto3.session.Session().region_name == "us-east-1"
    policy = material.policy(Signatures(keys=[{"kms": key}]))
    assert len(policy.public_keys) == 1 and "BEGIN PUBLIC KEY" in policy.public_keys[0]


def test_a_key_of_the_functions_region_by_id_still_works(material) -> None:  # type: ignore[no-untyped-def]
    key_id = boto3.client("kms").create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"][
        "KeyId"
    ]
    assert material.policy(Signatures(keys=[{"kms": key_id}])).public_keys


def test_an_alias_arn_gets_a_clear_error(material) -> None:  # type: ignore[no-untyped-def]
    """Refused by the configuration's validation; and by the trust material too, for a
    configuration that was never validated (``model_construct``: stored before the refusal)."""
    alias = "arn:aws:kms:eu-west-1:123456789012:alias/cosign"
    with pytest.raises(ValidationError) as refused:
        Signatures.model_validate({"keys": [{"kms": alias}]})
    source = PublicKeySource.model_construct(pem=None, secret=None, kms=alias)
    with pytest.raises(TrustMaterialError) as caught:
        material.policy(Signatures.model_construct(keys=[source]))
    for message in (str(refused.value), str(caught.value)):
        assert "alias ARN cannot be used" in message
        assert "arn:aws:kms:eu-west-1:123456789012:key/<key id>" in message and "SigningKmsKeyArns" in message
    assert not caught.value.transient


@pytest.mark.parametrize("key", ["arn:aws:s3:::bucket", "arn:aws:kms::123456789012:key/k"])
def test_an_arn_that_is_not_a_kms_key_is_refused_by_validation(key: str) -> None:
    with pytest.raises(ValidationError, match="not a KMS key ARN"):
        Signatures.model_validate({"keys": [{"kms": key}]})
