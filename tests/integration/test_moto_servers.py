"""The local stack's moto in processes of its own (``tagpin_local.moto_servers``, with
``StackOptions.processes``): SQS, SNS and EventBridge answered by one process, DynamoDB and the
rest by another. A client built from the SDK's environment the stack sets (the functions' code,
unchanged) reaches each service's server, a topic and a rule still deliver to their queue (those
three in one process), and the DynamoDB server counts how long its requests waited for their
lock (``moto_process.serialize_dynamodb``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from tagpin_local.moto_process import LOCK_HELD, LOCK_WAITED
from tagpin_local.moto_server import requests_by_operation
from tagpin_local.moto_servers import MotoServers, endpoint_variables
from tagpin_local.tables import create_state_table

REGION = "us-east-1"


@pytest.fixture(scope="module")
def servers() -> Iterator[MotoServers]:
    moto = MotoServers(processes=True)
    moto.start()
    try:
        yield moto
    finally:
        moto.stop()


@pytest.fixture
def session(servers: MotoServers, monkeypatch: pytest.MonkeyPatch) -> boto3.session.Session:
    """A session configured only by the environment, as a function's container is."""
    for key, value in endpoint_variables(servers.endpoint, servers.queues_endpoint).items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "local")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    return boto3.session.Session()


def _at(endpoint: str, service: str) -> Any:
    return boto3.session.Session(aws_access_key_id="local", aws_secret_access_key="local").client(
        service, endpoint_url=endpoint, region_name=REGION
    )


def test_each_service_is_answered_by_its_own_server(servers: MotoServers, session: Any) -> None:
    assert servers.queues_endpoint != servers.endpoint
    assert len(set(servers.pids())) == 2
    session.client("sqs").create_queue(QueueName="apart")
    create_state_table(session.client("dynamodb"), "apart")
    assert [u.rsplit("/", 1)[1] for u in _at(servers.queues_endpoint, "sqs").list_queues()["QueueUrls"]] == [
        "apart"
    ]
    assert "QueueUrls" not in _at(servers.endpoint, "sqs").list_queues()
    assert _at(servers.endpoint, "dynamodb").list_tables()["TableNames"] == ["apart"]
    assert _at(servers.queues_endpoint, "dynamodb").list_tables()["TableNames"] == []


def test_a_topic_and_a_rule_deliver_to_their_queue(session: Any) -> None:
    sqs, sns, events = session.client("sqs"), session.client("sns"), session.client("events")
    url = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic = sns.create_topic(Name="news")["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
    sns.publish(TopicArn=topic, Message="from the topic")
    events.put_rule(Name="pushes", EventPattern=json.dumps({"source": ["tagpin.test"]}))
    events.put_targets(Rule="pushes", Targets=[{"Id": "inbox", "Arn": arn}])
    events.put_events(Entries=[{"Source": "tagpin.test", "DetailType": "push", "Detail": "{}"}])
    bodies = [
        m["Body"]
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    ]
    assert "from the topic" in bodies
    assert any(json.loads(b).get("source") == "tagpin.test" for b in bodies if b.startswith("{"))


def test_dynamodb_requests_count_their_wait_for_the_lock(servers: MotoServers, session: Any) -> None:
    before = requests_by_operation(servers.endpoint)
    queues_before = requests_by_operation(servers.queues_endpoint)
    dynamodb = session.client("dynamodb")
    create_state_table(dynamodb, "counted")
    for n in range(3):
        dynamodb.put_item(TableName="counted", Item={"pk": {"S": f"P#{n}"}, "sk": {"S": "-"}})
    after = requests_by_operation(servers.endpoint)

    def made(name: str) -> int:
        return after.get(name, (0, 0.0, 0.0))[0] - before.get(name, (0, 0.0, 0.0))[0]

    assert made(LOCK_WAITED) == made(LOCK_HELD) == 4  # the table's creation and the 3 puts
    assert after[LOCK_HELD][2] > 0  # the CPU seconds while holding it
    assert requests_by_operation(servers.queues_endpoint).get(LOCK_HELD) == queues_before.get(LOCK_HELD)
