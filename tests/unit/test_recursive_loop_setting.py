"""Lambda's recursive loop detection: the template's ``RecursiveLoop`` settings (only a function
that sends to its own trigger allows loops) and the local runtime's model of the guard
(``tagpin_local.recursion``): the lineage a message carries through SQS, the 16 invocations a
chain may have, what a stopped record becomes. tests/integration/test_recursive_loop.py runs it
against a real rollout on the local stack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from tagpin_local import recursion
from tagpin_local.recursion import (
    MAX_INVOCATIONS,
    TRACE,
    Lineage,
    LoopDetector,
    RecursiveLoop,
    delivering,
    invocation,
    recursive_loop_settings,
)

from tests.support.constants import ROOT
from tests.unit.template_support import (
    events_of_type,
    function_ids,
    function_props,
    statements_for,
    template,  # noqa: F401 (the module fixture)
)

TEMPLATE = ROOT / "template.yaml"


# --------------------------------------------------------------------------- the template
def _sends_to_its_own_queue(tpl: dict[str, Any], logical_id: str) -> bool:
    props = function_props(tpl, logical_id)
    sources = [e["Queue"] for e in events_of_type(props, "SQS")]
    sent_to = [s["Resource"] for s in statements_for(props, "sqs:SendMessage")]
    return any(queue in sent_to for queue in sources)


def test_only_the_consumer_allows_recursive_loops(template):  # noqa: F811
    """Two functions send to the queue that triggers them. The consumer loops on purpose (its
    verifications, reminders, waves): Allow. The webhook's HTTP path queues a notification and its
    queued stage checks it, sending only to the changes queue: two webhook invocations per chain,
    never a loop, so Lambda's guard stays on for it (the model below shows both)."""
    looping = {fn for fn in function_ids(template) if _sends_to_its_own_queue(template, fn)}
    assert looping == {"ConsumerFunction", "WebhookFunction"}
    for fn in function_ids(template):
        setting = function_props(template, fn).get("RecursiveLoop", "Terminate")
        assert setting == ("Allow" if fn == "ConsumerFunction" else "Terminate"), fn


def test_the_local_stack_reads_each_functions_setting_from_the_template() -> None:
    settings = recursive_loop_settings(TEMPLATE)
    assert settings == {
        "poller": RecursiveLoop.TERMINATE,
        "webhook": RecursiveLoop.TERMINATE,
        "consumer": RecursiveLoop.ALLOW,
        "reconciler": RecursiveLoop.TERMINATE,
        "console": RecursiveLoop.TERMINATE,
        "writeback": RecursiveLoop.TERMINATE,
    }


def test_without_the_setting_the_consumer_gets_lambdas_default(tmp_path: Path) -> None:
    text = TEMPLATE.read_text(encoding="utf-8")
    assert text.count("RecursiveLoop: Allow") == 1
    removed = tmp_path / "template.yaml"
    removed.write_text(text.replace("RecursiveLoop: Allow", ""), encoding="utf-8")
    assert recursive_loop_settings(removed)["consumer"] is RecursiveLoop.TERMINATE


# --------------------------------------------------------------------------- the model
def _record(message_id: str, lineage: Lineage | None) -> dict[str, Any]:
    attributes = {} if lineage is None else {recursion.TRACE_ATTRIBUTE: lineage.header()}
    return {"MessageId": message_id, "Attributes": attributes}


def _chain(count: int) -> Lineage:
    lineage = Lineage()
    for _ in range(count):
        lineage = lineage.invoked("consumer")
    return lineage


def test_a_lineage_survives_its_header() -> None:
    lineage = Lineage().invoked("poller").invoked("consumer").invoked("consumer")
    assert Lineage.parse(lineage.header()) == lineage
    assert lineage.of("consumer") == 2 and lineage.of("poller") == 1 and lineage.of("webhook") == 0
    assert Lineage.parse(None) == Lineage.parse("Root=1-5f0c;Parent=53995c3f;Sampled=0") == Lineage()


@pytest.mark.parametrize("setting", list(RecursiveLoop))
def test_the_17th_invocation_of_a_chain_is_stopped_unless_allowed(setting: RecursiveLoop) -> None:
    detector = LoopDetector({"consumer": setting})
    for sent_by in range(MAX_INVOCATIONS):  # a message sent by the chain's n-th invocation
        admitted, lineage = detector.admit("consumer", [_record(f"m{sent_by}", _chain(sent_by))])
        assert [r["MessageId"] for r in admitted] == [f"m{sent_by}"]
        assert lineage.of("consumer") == sent_by + 1
    admitted, _ = detector.admit("consumer", [_record("m16", _chain(MAX_INVOCATIONS))])
    if setting is RecursiveLoop.ALLOW:
        assert len(admitted) == 1 and detector.dropped == []
    else:
        assert admitted == [] and [(d.message_id, d.invocations) for d in detector.dropped] == [("m16", 16)]
    assert detector.longest["consumer"] == (MAX_INVOCATIONS + 1 if setting is RecursiveLoop.ALLOW else 16)


def test_a_batch_goes_on_with_its_most_advanced_lineage_and_leaves_a_stopped_record_out() -> None:
    detector = LoopDetector({"consumer": RecursiveLoop.TERMINATE})
    records = [_record("new", None), _record("fifth", _chain(5)), _record("done", _chain(16))]
    admitted, lineage = detector.admit("consumer", records)
    assert [r["MessageId"] for r in admitted] == ["new", "fifth"]
    assert lineage.of("consumer") == 6
    assert [d.message_id for d in detector.dropped] == ["done"]


def test_other_functions_counts_do_not_count_for_the_consumer() -> None:
    detector = LoopDetector({"consumer": RecursiveLoop.TERMINATE})
    upstream = Lineage()
    for _ in range(40):
        upstream = upstream.invoked("webhook")
    admitted, lineage = detector.admit("consumer", [_record("m", upstream)])
    assert admitted and lineage.of("consumer") == 1 and lineage.of("webhook") == 40


@mock_aws
def test_what_an_invocation_sends_to_sqs_carries_its_lineage() -> None:
    """The SDK sends the invocation's trace header, SQS keeps it as AWSTraceHeader (stamp)."""
    recursion.install()
    sqs = boto3.session.Session().client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"outside": True}))  # no invocation: none
    inbound = _chain(4)  # the lineage LoopDetector.admit gave the SQS poller's 4th invocation
    with delivering(inbound), invocation("consumer") as lineage:
        assert TRACE.get() == lineage == inbound
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"inside": True}))
    assert TRACE.get() is None
    with invocation("poller"):  # a new chain (a schedule)
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"poll": True}))
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])
    headers = {
        next(iter(json.loads(m["Body"]))): m.get("Attributes", {}).get("AWSTraceHeader")
        for m in received["Messages"]
    }
    assert headers["outside"] is None
    assert Lineage.parse(headers["inside"]).of("consumer") == 4
    assert Lineage.parse(headers["poll"]) == Lineage().invoked("poller")


# --------------------------------------------------------------------------- the webhook's two stages
def _received(sqs: Any, url: str) -> list[dict[str, Any]]:
    return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])[
        "Messages"
    ]


@mock_aws
def test_a_webhook_chain_is_not_a_loop_the_guard_stops() -> None:
    """HTTP -> webhook -> notifications queue -> webhook -> changes queue -> consumer, with the
    template's settings (the webhook's guard on): every invocation is admitted, the webhook twice."""
    recursion.install()
    detector = LoopDetector(recursive_loop_settings(TEMPLATE))
    assert detector.setting("webhook") is RecursiveLoop.TERMINATE
    sqs = boto3.session.Session().client("sqs", region_name="us-east-1")
    notifications = sqs.create_queue(QueueName="notifications")["QueueUrl"]
    changes = sqs.create_queue(QueueName="changes")["QueueUrl"]
    with invocation("webhook"):  # an HTTP request: a new chain; the answer once queued
        sqs.send_message(QueueUrl=notifications, MessageBody="{}")
    admitted, lineage = detector.admit("webhook", _received(sqs, notifications))
    assert len(admitted) == 1 and lineage.of("webhook") == 2
    with delivering(lineage), invocation("webhook"):  # the queued stage: the change
        sqs.send_message(QueueUrl=changes, MessageBody="{}")
    admitted, lineage = detector.admit("consumer", _received(sqs, changes))
    assert len(admitted) == 1 and (lineage.of("webhook"), lineage.of("consumer")) == (2, 1)
    assert detector.dropped == []


@mock_aws
def test_a_webhook_that_sent_its_notifications_back_would_be_stopped() -> None:
    """Were the queued stage to queue a notification again (a loop, not tagpin's code), the guard
    the template leaves on for the webhook stops the chain's 17th invocation."""
    recursion.install()
    detector = LoopDetector(recursive_loop_settings(TEMPLATE))
    sqs = boto3.session.Session().client("sqs", region_name="us-east-1")
    notifications = sqs.create_queue(QueueName="notifications")["QueueUrl"]
    with invocation("webhook"):
        sqs.send_message(QueueUrl=notifications, MessageBody="{}")
    invocations = 1
    while True:
        messages = _received(sqs, notifications)
        admitted, lineage = detector.admit("webhook", messages)
        if not admitted:
            break
        invocations += 1
        sqs.delete_message(QueueUrl=notifications, ReceiptHandle=messages[0]["ReceiptHandle"])
        with delivering(lineage), invocation("webhook"):
            sqs.send_message(QueueUrl=notifications, MessageBody="{}")  # back to its own queue
    assert invocations == MAX_INVOCATIONS
    assert [(d.function, d.invocations) for d in detector.dropped] == [("webhook", MAX_INVOCATIONS)]
