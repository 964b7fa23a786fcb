"""`tagpin doctor`'s Lambda checks of a deployed stack (tagpin_cli.doctor_lambda): the consumer's
recursive loop setting and its concurrency against the account's quota. moto implements neither
GetFunctionRecursionConfig nor the concurrency settings, so a real boto3 Lambda client answers
through botocore's Stubber (each request and response checked against Lambda's API model), and
every operation the checks call must be in the permissions docs/troubleshooting.md lists."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from tagpin import wiring
from tagpin_cli import doctor, doctor_lambda
from tagpin_cli.doctor import Seat, Status
from tagpin_cli.environment import Stack

from tests.support.constants import ROOT
from tests.unit.test_doctor_aws import deployed

CONSUMER = "tagpin-consumer"
QUEUE = "arn:aws:sqs:eu-west-1:111122223333:changes.fifo"


@pytest.fixture
def lam(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    client = boto3.session.Session().client(
        "lambda", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    monkeypatch.setattr(wiring, "aws", lambda service: {"lambda": client}[service])
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def answer(
    stub: Stubber,
    recursion: str = "Allow",
    quota: int = 1000,
    reserved: int | None = None,
    maximum: int | None = 5,
) -> None:
    stub.add_response(
        "get_function_recursion_config", {"RecursiveLoop": recursion}, {"FunctionName": CONSUMER}
    )
    stub.add_response(
        "get_account_settings",
        {
            "AccountLimit": {
                "ConcurrentExecutions": quota,
                "UnreservedConcurrentExecutions": quota - (reserved or 0),
            }
        },
    )
    stub.add_response(
        "get_function_concurrency",
        {} if reserved is None else {"ReservedConcurrentExecutions": reserved},
        {"FunctionName": CONSUMER},
    )
    mapping: dict[str, Any] = {
        "UUID": "7e4d2b1c-0f3a-4a57-9c6e-2b8d1f0a9e31",
        "EventSourceArn": QUEUE,
        "FunctionArn": CONSUMER,
    }
    if maximum is not None:
        mapping["ScalingConfig"] = {"MaximumConcurrency": maximum}
    stub.add_response(
        "list_event_source_mappings", {"EventSourceMappings": [mapping]}, {"FunctionName": CONSUMER}
    )


def results(**parameters: str) -> dict[str, doctor.Result]:
    """The checks' results for a stack deployed with these parameters."""
    stack = Stack(**{**deployed().__dict__, "parameters": parameters})
    return {r.subject: r for r in doctor_lambda.check_lambda(Seat(stack))}


def test_a_consumer_that_allows_its_own_loops_with_room_to_run_passes(lam: Stubber) -> None:
    answer(lam)
    found = results()
    assert found["consumer recursive loops"].status is Status.OK
    assert found["consumer concurrency"].status is Status.OK
    assert "account quota 1000" in found["consumer concurrency"].detail


def test_a_consumer_left_at_lambdas_default_fails_with_how_to_fix_it(lam: Stubber) -> None:
    answer(lam, recursion="Terminate")
    result = results()["consumer recursive loops"]
    assert result.status is Status.FAIL and "16" in result.detail and "rolled back" in result.detail
    assert "RecursiveLoop: Allow" in result.fix
    assert f"put-function-recursion-config --function-name {CONSUMER} --recursive-loop Allow" in result.fix


def test_a_denied_recursion_read_is_not_checked_rather_than_failed(lam: Stubber) -> None:
    lam.add_client_error(
        "get_function_recursion_config", service_error_code="AccessDeniedException", http_status_code=403
    )
    lam.add_client_error(
        "get_account_settings", service_error_code="AccessDeniedException", http_status_code=403
    )
    found = results()
    assert found["consumer recursive loops"].status is Status.WARN
    assert "lambda:GetFunctionRecursionConfig" in found["consumer recursive loops"].fix
    assert found["consumer concurrency"].status is Status.WARN


def test_a_new_accounts_quota_warns_that_no_reservation_can_be_deployed(lam: Stubber) -> None:
    answer(lam, quota=10)
    result = results()["consumer concurrency"]
    assert result.status is Status.WARN and "a new account's quota" in result.detail
    assert "keeps 10 of it unreserved" in result.detail
    assert "ConsumerReservedConcurrency=0" in result.fix and "L-B99A9384" in result.fix


def test_a_quota_with_room_for_a_reservation_passes_and_one_without_warns(lam: Stubber) -> None:
    answer(lam, quota=101)  # 101 - 100 = 1 left to reserve, and an event source needs 2
    warned = results()["consumer concurrency"]
    assert warned.status is Status.WARN and "keeps 100 of it unreserved" in warned.detail
    assert "a new account's quota" not in warned.detail
    answer(lam, quota=102)
    assert results()["consumer concurrency"].status is Status.OK


def test_a_queue_allowed_more_batches_than_reserved_fails(lam: Stubber) -> None:
    answer(lam, reserved=3, maximum=5)
    result = results()["consumer concurrency"]
    assert result.status is Status.FAIL and "throttled" in result.detail
    assert "reservation 3" in result.detail and "maximum concurrency 5" in result.detail


def test_a_reservation_above_consumer_max_concurrency_warns_that_it_is_the_cap(lam: Stubber) -> None:
    """With ConsumerReservedConcurrency set, the template makes it the queue's maximum concurrency
    in place of ConsumerMaxConcurrency (no template Rule can compare two numbers): the doctor says
    so where the deployed maximum is above ConsumerMaxConcurrency."""
    answer(lam, reserved=10, maximum=10)
    result = results(ConsumerMaxConcurrency="5", ConsumerReservedConcurrency="10")["consumer concurrency"]
    assert result.status is Status.WARN
    assert "above ConsumerMaxConcurrency (5)" in result.detail and "up to 10 batches" in result.detail
    assert "ConsumerReservedConcurrency (10) is the queue's maximum in its place" in result.detail
    assert "ConsumerReservedConcurrency=5" in result.fix and "ConsumerMaxConcurrency=10" in result.fix

    answer(lam, reserved=10, maximum=10)  # the parameters agree: nothing to say
    assert results(ConsumerMaxConcurrency="10")["consumer concurrency"].status is Status.OK
    answer(lam, reserved=3, maximum=3)  # a reservation below the cap caps it lower: as asked
    assert results(ConsumerMaxConcurrency="5")["consumer concurrency"].status is Status.OK
    answer(lam, maximum=8)  # no reservation, yet above it: changed outside the template
    changed = results(ConsumerMaxConcurrency="5")["consumer concurrency"]
    assert changed.status is Status.WARN and "changed outside the template" in changed.detail


def test_locally_the_check_is_skipped() -> None:
    local = Stack(
        state_table="t",
        queue_url="q",
        dead_letter_queue_url="d",
        config_parameter="/c",
        aws_endpoint="http://x",
    )
    assert local.local
    (result,) = doctor_lambda.check_lambda(Seat(local))
    assert result.status is Status.SKIP


def test_every_lambda_call_of_the_doctor_is_a_documented_permission(lam: Stubber) -> None:
    """What the doctor calls on Lambda (check_functions and the checks here) is in the list of
    what it needs (docs/troubleshooting.md), action by action."""
    calls: list[str] = []
    lam.client.meta.events.register("before-call.lambda", lambda model, **_: calls.append(model.name))
    answer(lam)
    doctor_lambda.check_lambda(Seat(deployed()))
    for _function in doctor.FUNCTIONS:
        lam.add_response(
            "get_function_configuration",
            {"State": "Active", "LastUpdateStatus": "Successful", "Environment": {"Variables": {}}},
        )
    doctor.check_functions(Seat(deployed()))
    text = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    needs = text[text.index("What the doctor needs on AWS") :].split("\n\n", 1)[0]
    documented = set(re.findall(r"`(lambda:[A-Za-z]+)`", needs))
    assert {f"lambda:{name}" for name in calls} <= documented
    assert "lambda:GetFunctionRecursionConfig" in documented
