"""What AWS would refuse, refused first with a clear message: secrets the functions may not read
(outside ``tagpin/``), and configuration documents too big for an SSM parameter (compressed into
the free Standard tier when they fit, Advanced up to 8 KB, an error beyond)."""

from __future__ import annotations

import random
import string

import pytest
from tagpin.adapters.config_source import (
    ADVANCED_LIMIT,
    STANDARD_LIMIT,
    ConfigLoader,
    parameter_text,
    parameter_value,
)
from tagpin.domain.config import ConfigError, parse_config

CLUSTER = "clusters:\n  lab: {kubeconfig: {secret: tagpin/clusters/lab}}\n"


@pytest.mark.parametrize(
    ("document", "field", "prefix"),
    [
        (
            "clusters:\n  lab: {kubeconfig: {secret: prod/lab}}\n",
            "clusters.lab.kubeconfig.secret",
            "clusters",
        ),
        (
            "clusters:\n  lab: {service_account: {secret: lab}}\n",
            "clusters.lab.service_account.secret",
            "clusters",
        ),
        (
            "registries:\n  ghcr.io: {credentials_secret: other/ghcr}\n",
            "registries.ghcr.io.credentials_secret",
            "registries",
        ),
        (
            "rollout:\n  notifications: {webhooks_secret: tagpin}\n",
            "rollout.notifications.webhooks_secret",
            "notifications",
        ),
        (
            "clusters:\n  lab: {kubeconfig: {secret: 'tagpin/clusters/'}}\n",
            "clusters.lab.kubeconfig.secret",
            "clusters",
        ),
        # under tagpin/, but not where its kind lives: a function that needs it could not read it
        (
            "clusters:\n  lab: {kubeconfig: {secret: tagpin/lab}}\n",
            "clusters.lab.kubeconfig.secret",
            "clusters",
        ),
        (
            "clusters:\n  lab: {kubeconfig: {secret: tagpin/registries/lab}}\n",
            "clusters.lab.kubeconfig.secret",
            "clusters",
        ),
        (
            "registries:\n  ghcr.io: {credentials_secret: tagpin/clusters/ghcr}\n",
            "registries.ghcr.io.credentials_secret",
            "registries",
        ),
        (
            "rollout:\n  notifications: {webhooks_secret: tagpin/webhook}\n",
            "rollout.notifications.webhooks_secret",
            "notifications",
        ),
    ],
)
def test_a_secret_outside_its_kinds_prefix_is_refused_naming_the_field(
    document: str, field: str, prefix: str
) -> None:
    """Registry credentials live under tagpin/registries/, cluster credentials under tagpin/clusters/,
    notification webhooks under tagpin/notifications/: template.yaml lets only the functions that
    read each kind read its prefix."""
    with pytest.raises(ConfigError) as info:
        parse_config(document)
    message = str(info.value)
    assert field in message and f"must be a secret named tagpin/{prefix}/<name>" in message
    granted = f"the SSM parameters /tagpin/{prefix}/*, or the Secrets Manager secrets tagpin/{prefix}/*"
    assert granted in message


@pytest.mark.parametrize(
    "name", ["tagpin/clusters/a@b", "tagpin/clusters/a+b", "tagpin/clusters//lab", "tagpin/clusters/lab/"]
)
def test_a_secret_name_invalid_in_either_store_is_refused(name: str) -> None:
    """SSM parameter names allow letters, digits and _.-/ only (no +=@, no empty level): a name is
    valid in both stores, so a configuration works with either SecretStore."""
    with pytest.raises(ConfigError) as info:
        parse_config(f"clusters:\n  lab:\n    kubeconfig: {{secret: '{name}'}}\n")
    assert "clusters.lab.kubeconfig.secret" in str(info.value)
    assert "valid as an SSM parameter and as a Secrets Manager secret" in str(info.value)


def test_secrets_under_their_kinds_prefix_are_accepted() -> None:
    config = parse_config(
        CLUSTER
        + "registries:\n  ghcr.io: {credentials_secret: tagpin/registries/ghcr}\n"
        + "rollout:\n  notifications: {webhooks_secret: tagpin/notifications/chat}\n"
    )
    assert config.registry("ghcr.io").credentials_secret == "tagpin/registries/ghcr"
    assert config.clusters["lab"].kubeconfig is not None
    assert config.clusters["lab"].kubeconfig.secret == "tagpin/clusters/lab"
    assert config.rollout.notifications.webhooks_secret == "tagpin/notifications/chat"


def document(targets: int) -> str:
    """A configuration listing ``targets`` explicit targets: YAML that compresses as real ones do."""
    lines = [CLUSTER, "images:\n"]
    for i in range(targets):
        lines.append(f"  - image: registry.example.com/team/app{i}:stable\n")
        lines.append(
            f"    targets: [{{cluster: lab, namespace: team{i % 7}, name: app{i}, container: app}}]\n"
        )
    return "".join(lines)


def test_small_documents_are_stored_as_they_are() -> None:
    text = document(5)
    stored = parameter_value(text)
    assert (stored.tier, stored.compressed, stored.value) == ("Standard", False, text)


def test_a_document_over_4_kb_is_compressed_into_the_standard_tier() -> None:
    text = document(120)
    assert len(text) > STANDARD_LIMIT
    stored = parameter_value(text)
    assert (stored.tier, stored.compressed) == ("Standard", True)
    assert len(stored.value) <= STANDARD_LIMIT
    assert parameter_text(stored.value) == text
    assert len(parse_config(parameter_text(stored.value)).images) == 120


def test_what_compression_cannot_fit_goes_advanced_then_is_refused() -> None:
    rng = random.Random(7)
    noise = "".join(rng.choice(string.ascii_letters) for _ in range(11_000))  # compresses badly
    advanced = parameter_value(f"# {noise[:5000]}\n{CLUSTER}")
    assert advanced.tier == "Advanced" and STANDARD_LIMIT < len(advanced.value) <= ADVANCED_LIMIT
    with pytest.raises(ConfigError, match="an SSM parameter holds at most 8192 bytes"):
        parameter_value(f"# {noise}\n{CLUSTER}")


def test_the_loader_reads_a_compressed_parameter(aws) -> None:
    import boto3

    text = document(120)
    stored = parameter_value(text)
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name="/tagpin/config", Value=stored.value, Type="String", Tier=stored.tier
    )
    assert len(ConfigLoader(parameter="/tagpin/config").load().images) == 120
