"""A signature gate's AWS KMS key is read where it lives: ``kms:GetPublicKey`` in the key ARN's
or alias ARN's region (a key in another region than the function's; the role is granted
GetPublicKey on the key ARNs of SigningKmsKeyArns, and an alias is authorised as its key), and an
ARN that is neither refused. The composition root's trust material (``wiring.trust_material``) on
moto, the function in us-east-1."""

from __future__ import annotations

import boto3
import pytest
from tagpin import wiring
from tagpin.domain.config import ConfigError, parse_config
from tagpin.domain.config.signatures import Signatures
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


def test_an_alias_arn_is_read_in_its_region(material) -> None:  # type: ignore[no-untyped-def]
    """An alias is authorised as the key it names, so an alias ARN works as the key's ARN does
    (SigningKmsKeyArns lists the key's ARN): read in the alias's region."""
    far = boto3.client("kms", region_name="eu-west-1")
    key = far.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    far.create_alias(AliasName="alias/cosign", TargetKeyId=key)
    alias = "arn:aws:kms:eu-west-1:123456789012:alias/cosign"
    policy = material.policy(Signatures.model_validate({"keys": [{"kms": alias}]}))
    assert len(policy.public_keys) == 1 and "BEGIN PUBLIC KEY" in policy.public_keys[0]


@pytest.mark.parametrize(
    "key", ["arn:aws:s3:::bucket", "arn:aws:kms::123456789012:key/k", "arn:aws:kms:eu-west-1:1:grant/g"]
)
def test_an_arn_that_is_no_kms_key_is_refused_before_it_is_stored(material, key: str) -> None:  # type: ignore[no-untyped-def]
    """`tagpin config validate` and `push` refuse it (``parse_config(storing=True)``); a document
    stored before keeps loading in the functions, and only that gate refuses it, clearly."""
    document = "images:\n  - image: registry.example/team/web:stable\n"
    document += f"    signatures: {{keys: [{{kms: '{key}'}}]}}\n"
    document += "    targets: [{cluster: c, namespace: n, name: w, container: w}]\n"
    document += "clusters: {c: {eks: {name: c, region: eu-west-1}}}\n"
    with pytest.raises(ConfigError, match="not a KMS key ARN"):
        parse_config(document, storing=True)
    loaded = parse_config(document)  # what every function does with the stored document
    (followed,) = loaded.images
    assert followed.signatures is not None
    with pytest.raises(TrustMaterialError, match="not a KMS key ARN") as caught:
        material.policy(followed.signatures)
    assert not caught.value.transient
