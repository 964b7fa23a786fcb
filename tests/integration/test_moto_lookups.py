"""The local stack's moto makes two lookups cheaper (``tagpin_local.moto_lookups``) and answers
what moto itself answers: a ReceiveMessage no longer builds the queue's attributes per message it
walks (fails without the module: 3 builds a message), and messages past the queue's retention
period are still dropped, those within it still received, with moto's own lookups and with ours.

moto in this process (``mock_aws``, boto3 as the functions call it); a region of its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws
from moto.core.utils import camelcase_to_underscores
from moto.sqs.models import Queue
from tagpin_local import moto_lookups

REGION = "eu-south-2"  # none of the other tests' moto state


@contextmanager
def fifo_queue(messages: int, retention_s: int = 345600) -> Iterator[tuple[Any, str]]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(
            QueueName="lookups.fifo",
            Attributes={
                "FifoQueue": "true",
                "ContentBasedDeduplication": "false",
                "MessageRetentionPeriod": str(retention_s),
            },
        )["QueueUrl"]
        for i in range(messages):
            sqs.send_message(
                QueueUrl=url, MessageBody=f"m{i}", MessageGroupId=f"g{i}", MessageDeduplicationId=f"d{i}"
            )
        yield sqs, url


@contextmanager
def counting_attribute_builds() -> Iterator[list[int]]:
    built = [0]
    moto_property = vars(Queue)["attributes"]

    def counted(self: Any) -> Any:
        built[0] += 1
        return moto_property.fget(self)

    Queue.attributes = property(counted)  # type: ignore[assignment,method-assign]
    try:
        yield built
    finally:
        Queue.attributes = moto_property  # type: ignore[method-assign]


def test_a_receive_does_not_build_the_queues_attributes_per_message() -> None:
    assert moto_lookups.install()
    with fifo_queue(20) as (sqs, url), counting_attribute_builds() as built:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(got) == 10
    assert built[0] < 10  # moto's own: 3 a message walked


def received(messages_aged_s: float) -> list[str]:
    """The bodies a receive gets from a queue keeping messages 60 s, its first two messages sent
    ``messages_aged_s`` ago and the third now."""
    from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
    from moto.sqs.models import sqs_backends

    with fifo_queue(3, retention_s=60) as (sqs, url):
        queue = sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues["lookups.fifo"]
        for message in queue._messages[:2]:
            message.sent_timestamp -= int(messages_aged_s * 1000)  # type: ignore[operator,assignment]
        answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
        return sorted(message["Body"] for message in answer.get("Messages", []))


def test_the_retention_period_drops_what_moto_drops() -> None:
    assert moto_lookups.install()
    with moto_lookups.as_is():
        expected = [received(120), received(30)]
    assert [received(120), received(30)] == expected
    assert not {"m0", "m1"} & set(expected[0])  # past the retention period: dropped
    assert expected[1] == ["m0", "m1", "m2"]


def test_names_are_converted_as_moto_converts_them() -> None:
    assert moto_lookups.install()
    from moto.core import responses

    names = ["SendMessage", "ReceiveMessage", "MessageRetentionPeriod", "FifoQueue", "KMSMasterKeyId", ""]
    for name in names:
        assert responses.camelcase_to_underscores(name) == camelcase_to_underscores(name)  # type: ignore[attr-defined]


def test_sqs_reads_moto_clock_without_datetimes() -> None:
    """The same clock as moto's own (seconds since the epoch, UTC), read from ``time.time``."""
    import datetime

    from moto.core import utils
    from moto.sqs import models

    assert moto_lookups.install()
    unix_time, unix_time_millis = vars(models)["unix_time"], vars(models)["unix_time_millis"]
    assert unix_time is not utils.unix_time  # moto's own reads it through datetimes
    assert abs(unix_time() - utils.unix_time()) < 1.0
    assert abs(unix_time_millis() - utils.unix_time_millis()) < 1000.0
    moment = datetime.datetime(2026, 11, 27, 10, 0, 0, 250000)
    assert unix_time(moment) == utils.unix_time(moment)
