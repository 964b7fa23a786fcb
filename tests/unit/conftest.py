"""Unit-test fixtures: fake AWS credentials and moto in-process (no network, no server)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.ports.state import State

from tests.support.aws import create_table
from tests.support.constants import DLQ_NAME, IDEMPOTENCY_TABLE, QUEUE_NAME, REGION, STATE_TABLE


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials in a fixed region; never a real or local endpoint."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    for name in (
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_DYNAMODB",
        "AWS_ENDPOINT_URL_SQS",
        "AWS_ENDPOINT_URL_SSM",
        "AWS_PROFILE",
        "POWERTOOLS_IDEMPOTENCY_DISABLED",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def aws(aws_env: None) -> Iterator[None]:
    """Every AWS call inside the test goes to moto, in this process."""
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import base

    # powertools keeps providers (and their boto3 clients) and values across calls: start clean.
    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()
    with mock_aws():
        yield
    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()


@pytest.fixture
def dynamodb(aws: None) -> Any:
    return boto3.client("dynamodb", region_name=REGION)


@pytest.fixture
def sqs(aws: None) -> Any:
    return boto3.client("sqs", region_name=REGION)


@pytest.fixture
def state_table(dynamodb: Any) -> str:
    create_table(dynamodb, STATE_TABLE, ("pk", "sk"))
    return STATE_TABLE


@pytest.fixture
def idempotency_table(dynamodb: Any) -> str:
    """The powertools idempotency table: partition key ``id``, as the template declares it."""
    create_table(dynamodb, IDEMPOTENCY_TABLE, ("id",))
    return IDEMPOTENCY_TABLE


@dataclass(frozen=True)
class Queues:
    url: str
    dlq_url: str
    dlq_arn: str


@pytest.fixture
def queues(sqs: Any) -> Queues:
    """The changes FIFO queue (explicit deduplication ids) and its FIFO dead-letter queue."""
    dlq_url = sqs.create_queue(QueueName=DLQ_NAME, Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    url = sqs.create_queue(
        QueueName=QUEUE_NAME,
        Attributes={
            "FifoQueue": "true",
            "ContentBasedDeduplication": "false",
            "VisibilityTimeout": "30",
            "RedrivePolicy": f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"3"}}',
        },
    )["QueueUrl"]
    return Queues(url=url, dlq_url=dlq_url, dlq_arn=dlq_arn)


class SerializedClient:
    """A boto3 client whose requests run one at a time.

    DynamoDB applies each request to an item atomically; moto evaluates the condition and writes in
    Python without a lock, so threads racing through moto can both pass one condition. Serialising
    single requests (never sequences of them) restores DynamoDB's guarantee and nothing more: a
    concurrency test then exercises the store's logic, not moto's races.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name.startswith("_") or not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return call


@pytest.fixture
def store(dynamodb: Any, state_table: str) -> State:
    return dynamodb_state(SerializedClient(dynamodb), state_table)
