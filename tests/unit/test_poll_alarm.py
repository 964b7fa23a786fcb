"""The alarm on poll runs that do not finish (``PollNotFinishedAlarm``, with DetailedMonitoring)
fires on real trouble only: a poller deployed before its configuration exists finishes every run
(there is nothing to poll) and says so with ``PollRunsCompleted``, and that it is not behind with
``PollBehind`` = 0, which the alarm watches. The real poller handler, on moto, its metrics enabled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from tagpin import wiring
from tagpin.observability import metrics
from tagpin_local.lambda_runtime import LocalContext, load_handler, scheduled_event

from tests.unit.template_support import resources, template  # noqa: F401 (the module fixture)


def _metrics(out: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            blob = json.loads(line)
            for definition in blob["_aws"]["CloudWatchMetrics"]:
                for metric in definition["Metrics"]:
                    found[metric["Name"]] = blob[metric["Name"]]
    return found


@pytest.fixture
def unconfigured(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    environment = {
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
        "TAGPIN_CONFIG_PARAMETER": "/tagpin/config", "TAGPIN_STATE_TABLE": "tagpin-state",
        "TAGPIN_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/tagpin-changes.fifo",
        "TAGPIN_SECRET_STORE": "ssm", "POWERTOOLS_METRICS_NAMESPACE": "tagpin",
        "POWERTOOLS_SERVICE_NAME": "poller",
    }  # fmt: skip
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")  # as with DetailedMonitoring=true
    metrics.clear_metrics()  # the metric set is the process's: start with none
    with mock_aws():
        wiring.reset()
        boto3.client("dynamodb").create_table(
            TableName="tagpin-state",
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk")],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield
        wiring.reset()


def test_a_poller_waiting_for_its_configuration_completes_its_runs(unconfigured, capsys, template):  # noqa: F811
    handler = load_handler("poller")
    answer = handler(scheduled_event(), LocalContext("tagpin-poller", timeout_s=300))
    assert answer["configured"] is False  # nothing polled: the SSM parameter does not exist
    metrics = _metrics(capsys.readouterr().out)
    assert metrics.get("PollRunsCompleted") == [1.0]
    assert metrics.get("PollBehind") == [0.0]
    # which is what the alarm watches, by the same name and dimension: ALARM at 1
    alarm = resources(template)["PollNotFinishedAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("tagpin", "PollBehind")
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "poller"}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)


def test_with_metrics_disabled_nothing_is_published_however_many_runs(unconfigured, capsys, monkeypatch):
    """DetailedMonitoring=false: no EMF document in the log, ever. powertools itself would print
    one once a metric had 100 values (a warm container's 100th run), and CloudWatch bills the
    custom metrics it creates."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    handler = load_handler("poller")
    for _ in range(120):
        assert handler(scheduled_event(), LocalContext("tagpin-poller", timeout_s=300))["configured"] is False
    assert _metrics(capsys.readouterr().out) == {}
    assert metrics.metric_set == {}
