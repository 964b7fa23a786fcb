"""The TAGPIN_* environment: one model, validated at cold start, every error naming its variable."""

from __future__ import annotations

import pytest
from tagpin.settings import NEEDS, Settings, SettingsError

EVERYTHING = {
    "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
    "TAGPIN_STATE_TABLE": "tagpin-state",
    "TAGPIN_IDEMPOTENCY_TABLE": "tagpin-idempotency",
    "TAGPIN_QUEUE_URL": "https://sqs.example/changes.fifo",
    "TAGPIN_VERIFICATION_QUEUE_URL": "https://sqs.example/verifications",
    "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook",
    "TAGPIN_NOTIFICATIONS_QUEUE_URL": "https://sqs.example/notifications",
    "TAGPIN_DEAD_LETTER_QUEUE_URL": "https://sqs.example/changes-dlq.fifo",
    "TAGPIN_WRITEBACK_QUEUE_URL": "https://sqs.example/writeback.fifo",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in [n for n in os.environ if n.startswith("TAGPIN_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_defaults_and_values(clean_env: pytest.MonkeyPatch) -> None:
    for name, value in EVERYTHING.items():
        clean_env.setenv(name, value)
    settings = Settings.from_env()
    assert settings.state_table == "tagpin-state" and settings.queue_url == "https://sqs.example/changes.fifo"
    assert (settings.poll_concurrency, settings.registry_concurrency) == (64, 32)
    assert settings.notify_topic_arn is None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "TAGPIN_POLL_CONCURRENCY",
            "many",
            "TAGPIN_POLL_CONCURRENCY: Input should be a valid integer, unable to parse string as an integer",
        ),
        (
            "TAGPIN_REGISTRY_CONCURRENCY",
            "0",
            "TAGPIN_REGISTRY_CONCURRENCY: Input should be greater than or equal to 1",
        ),
        ("TAGPIN_STATE_TABLE", "x", "TAGPIN_STATE_TABLE: String should have at least 3 characters"),
    ],
)
def test_a_malformed_variable_is_named(
    clean_env: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    clean_env.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        Settings.from_env()
    assert str(info.value) == message


def test_two_config_sources_are_refused(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("TAGPIN_CONFIG_PARAMETER", "/tagpin/config")
    clean_env.setenv("TAGPIN_CONFIG_FILE", "tagpin.yaml")
    with pytest.raises(SettingsError, match="set only one of TAGPIN_CONFIG_PARAMETER and TAGPIN_CONFIG_FILE"):
        Settings.from_env()


def test_an_empty_variable_counts_as_unset(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("TAGPIN_CONFIG_PARAMETER", "")
    clean_env.setenv("TAGPIN_CONFIG_FILE", "/etc/tagpin.yaml")
    settings = Settings.from_env()
    assert (settings.config_parameter, settings.config_file) == (None, "/etc/tagpin.yaml")


def test_variables_are_read_as_pydantic_settings_read_them() -> None:
    # tagpin.settings reads the environment itself (pydantic-settings cost a tenth of every cold
    # start): the prefix in any case, empty as unset, text in lax mode, other variables ignored.
    settings = Settings.from_env(
        {
            "tagpin_state_table": "tagpin-state",
            "Tagpin_Poll_Concurrency": "8",
            "TAGPIN_RECONCILE_RESOLVES": "false",
            "TAGPIN_QUEUE_URL": "",
            "TAGPIN_UNKNOWN": "x",
            "STATE_TABLE": "not-ours",
        }
    )
    assert (settings.state_table, settings.poll_concurrency) == ("tagpin-state", 8)
    assert (settings.reconcile_resolves, settings.queue_url) == (False, None)
    with pytest.raises(SettingsError, match="TAGPIN_POLL_PARTS: Input should be a valid integer"):
        Settings.from_env({"TAGPIN_POLL_PARTS": "two"})


@pytest.mark.parametrize("function", sorted(NEEDS))
def test_each_function_names_what_it_misses(clean_env: pytest.MonkeyPatch, function: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.for_function(function)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith(
        f"the {function} function needs TAGPIN_CONFIG_PARAMETER (or TAGPIN_CONFIG_FILE)"
    )
    assert "TAGPIN_STATE_TABLE" in message and "TAGPIN_NOTIFY_TOPIC_ARN" not in message  # optional
    for name, value in EVERYTHING.items():
        clean_env.setenv(name, value)
    assert Settings.for_function(function).state_table == "tagpin-state"  # type: ignore[arg-type]


def test_require_names_the_variable(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError, match="TAGPIN_WEBHOOK_SECRET is not set"):
        Settings.from_env().require("webhook_secret")


def test_the_write_back_queue_is_optional_for_the_consumer_and_needed_by_the_write_back_function(
    clean_env: pytest.MonkeyPatch,
) -> None:
    for name, value in EVERYTHING.items():
        if name != "TAGPIN_WRITEBACK_QUEUE_URL":
            clean_env.setenv(name, value)
    assert Settings.for_function("consumer").writeback_queue_url is None  # GitWriteBack=disabled
    with pytest.raises(SettingsError, match="the writeback function needs TAGPIN_WRITEBACK_QUEUE_URL"):
        Settings.for_function("writeback")
