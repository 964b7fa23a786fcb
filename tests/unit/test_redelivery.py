"""Failed queue records come back on a schedule of their own (tagpin.domain.redelivery): soon
after a blip, later while a failure lasts, dead-lettered only after half an hour; a record that can
never succeed comes back at once, to reach the dead-letter queue in seconds; a delayed verification
received before it is due comes back when it is due."""

from __future__ import annotations

import boto3
import pytest
from tagpin import wiring
from tagpin.domain.redelivery import DELAYS_S, EARLY_RECEIVES, PERMANENT, RECEIVES, redelivery_delay
from tagpin.redelivery import back_off

from tests.support.constants import REGION
from tests.unit.template_support import load_template, resources


def test_the_schedule_outlasts_half_an_hour_before_a_dead_letter() -> None:
    waited = sum(redelivery_delay(n) for n in range(1, RECEIVES))  # failures before the last receive
    assert waited >= 30 * 60
    assert [redelivery_delay(n) for n in (1, 2, 3)] == [5, 10, 20]  # a blip costs seconds
    assert redelivery_delay(0) == DELAYS_S[0] and redelivery_delay(99) == DELAYS_S[-1] <= 900


def test_the_queue_dead_letters_after_the_schedule() -> None:
    res = resources(load_template())
    assert res["ChangesQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] == RECEIVES
    # the whole schedule, and the one early receive of a delayed verification
    assert len(DELAYS_S) + 1 + EARLY_RECEIVES == RECEIVES


def test_back_off_sets_each_failed_records_visibility(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # moto's SQS on a clock of the test's: a record's visibility is read at the seconds the test
    # names, not at whenever a busy machine lets it receive (2.5 s of margin on each side before)
    from moto.core.utils import unix_time_millis
    from moto.sqs import models

    now_ms = [unix_time_millis()]

    def tick() -> float:  # a millisecond a reading: a visibility of 0 is over by the next one
        now_ms[0] += 1
        return now_ms[0]

    monkeypatch.setattr(models, "unix_time_millis", tick)
    monkeypatch.setattr(models, "unix_time", lambda: tick() / 1000)

    def sleep(seconds: float) -> None:
        now_ms[0] += seconds * 1000

    wiring.reset()
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    for body in ("ok", "transient", "poison", "early"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    records = [
        {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "attributes": m["Attributes"]}
        for m in received
    ]
    ids = {m["Body"]: m["MessageId"] for m in received}
    response = {"batchItemFailures": [{"itemIdentifier": ids[b]} for b in ("transient", "poison", "early")]}
    # the handler chose two delays: at once for the poison, 2 s for a verification due in 2 s
    back_off(response, records, url, later={ids["poison"]: PERMANENT, ids["early"]: 2})
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert [m["Body"] for m in again] == ["poison"]  # PERMANENT: at once; "ok" is not failed at all
    sleep(2.5)
    due = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert {m["Body"] for m in due} == {"early"}  # when it is due, not the schedule's 5 s
    sleep(redelivery_delay(1) - 2.5 + 0.5)
    later = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert {m["Body"] for m in later} == {"transient"}  # back after 5 s, not the queue's 30 s
    assert PERMANENT == 0
    wiring.reset()
