"""``tagpin doctor``'s Lambda checks of a deployed stack: what Lambda itself does to the consumer.

- recursive loops: the consumer sends its verifications, reminders and promotions to its own
  queue, so its ``RecursiveLoop`` must be ``Allow`` (``lambda:GetFunctionRecursionConfig``): with
  Lambda's default, ``Terminate``, every chain stops after 16 invocations, a rollout slower than
  about 5 minutes stalls and a failing one is never rolled back (template.yaml sets it; a stack
  deployed before it did, or a hand-made change, shows here).
- concurrency: the account's quota of concurrent executions (``lambda:GetAccountSettings``), the
  consumer's reservation (``lambda:GetFunctionConcurrency``) and its queue's maximum concurrency
  (``lambda:ListEventSourceMappings``). Lambda keeps 100 of the quota unreserved (all of it below
  100): on a new account, whose quota is 10, no ``ConsumerReservedConcurrency`` can be deployed,
  and every function shares those 10. A queue allowed more concurrent batches than the consumer
  has reserved gets its batches throttled (they return to the queue and count towards the
  dead-letter queue). A queue allowed more than the stack's ``ConsumerMaxConcurrency`` warns: with a
  reservation the template uses the reservation as the queue's maximum in its place (a template
  Rule cannot compare two numbers, so it cannot refuse a reservation above it), which an operator
  who set ``ConsumerMaxConcurrency`` to protect a cluster's API may not expect.

Locally the runtime models the loop guard from template.yaml (``tagpin_local.recursion``) and has
no concurrency quota: skipped.
"""

from __future__ import annotations

from typing import Any

from tagpin_cli.doctor_seat import Result, Seat, Status, short

CHECK = "lambda"
UNRESERVED_FLOOR = 100  # Lambda keeps this much of the quota unreserved (all of a smaller quota)
NEW_ACCOUNT_QUOTA = 10  # a new account's concurrent executions
QUOTA_FIX = (
    "request a higher 'Concurrent executions' quota (Service Quotas, AWS Lambda, L-B99A9384); "
    "until then deploy with ConsumerReservedConcurrency=0"
)


def _denied(exc: BaseException) -> bool:
    code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
    return code in {"AccessDenied", "AccessDeniedException"}


def check_lambda(seat: Seat) -> list[Result]:
    if seat.local:
        return [
            Result(
                CHECK,
                "consumer",
                Status.SKIP,
                "the local stack models Lambda's loop guard from template.yaml and has no concurrency quota",
            )
        ]
    name = seat.stack.outputs.get("ConsumerFunctionName", "")
    return [_recursion(name), *_concurrency(name, seat.stack.parameters.get("ConsumerMaxConcurrency"))]


def _recursion(name: str) -> Result:
    from tagpin import wiring

    subject = "consumer recursive loops"
    try:
        setting = wiring.aws("lambda").get_function_recursion_config(FunctionName=name).get("RecursiveLoop")
    except Exception as exc:
        if _denied(exc):
            return Result(
                CHECK,
                subject,
                Status.WARN,
                "not checked: lambda:GetFunctionRecursionConfig was denied",
                "give the doctor lambda:GetFunctionRecursionConfig (docs/troubleshooting.md)",
            )
        raise
    if setting == "Allow":
        return Result(
            CHECK, subject, Status.OK, f"{name}: RecursiveLoop Allow (verification chains of any length)"
        )
    return Result(
        CHECK,
        subject,
        Status.FAIL,
        f"{name}: RecursiveLoop {setting or 'Terminate'}: Lambda stops the consumer's verifications after "
        "16 in a chain, so a rollout slower than about 5 minutes stalls and a failing one is not rolled back",
        "deploy the current template (ConsumerFunction has RecursiveLoop: Allow), or "
        f"aws lambda put-function-recursion-config --function-name {name} --recursive-loop Allow",
    )


def _concurrency(name: str, max_concurrency: str | None) -> list[Result]:
    from tagpin import wiring

    client: Any = wiring.aws("lambda")
    subject = "consumer concurrency"
    try:
        limits = client.get_account_settings().get("AccountLimit", {})
        reserved = client.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions")
        mappings = client.list_event_source_mappings(FunctionName=name).get("EventSourceMappings", [])
    except Exception as exc:
        if _denied(exc):
            return [
                Result(
                    CHECK,
                    subject,
                    Status.WARN,
                    f"not checked: {short(exc)}",
                    "give the doctor lambda:GetAccountSettings, lambda:GetFunctionConcurrency and "
                    "lambda:ListEventSourceMappings (docs/troubleshooting.md)",
                )
            ]
        raise
    quota = limits.get("ConcurrentExecutions")
    maximum = max(
        (int((m.get("ScalingConfig") or {}).get("MaximumConcurrency") or 0) for m in mappings), default=0
    )
    figures = (
        f"account quota {quota if quota is not None else '?'} concurrent executions "
        f"({limits.get('UnreservedConcurrentExecutions', '?')} unreserved); consumer reservation "
        f"{reserved if reserved is not None else 'none'}; queue maximum concurrency {maximum or 'not set'}"
    )
    if reserved is not None and maximum > int(reserved):
        return [
            Result(
                CHECK,
                subject,
                Status.FAIL,
                f"{figures}: the queue may start more batches than the consumer has reserved; the rest "
                "are throttled, return to the queue and count towards the dead-letter queue",
                "deploy the current template (the queue's maximum concurrency is kept within "
                "ConsumerReservedConcurrency)",
            )
        ]
    if max_concurrency is not None and max_concurrency.isdigit() and maximum > int(max_concurrency):
        cause = (
            f"ConsumerReservedConcurrency ({reserved}) is the queue's maximum in its place"
            if reserved is not None
            else "the event source was changed outside the template"
        )
        return [
            Result(
                CHECK,
                subject,
                Status.WARN,
                f"{figures}: above ConsumerMaxConcurrency ({max_concurrency}): {cause}, so up to "
                f"{maximum} batches run at once",
                f"to run at most {max_concurrency}, deploy with ConsumerReservedConcurrency="
                f"{max_concurrency} (or 0: none reserved); else set ConsumerMaxConcurrency={maximum} so "
                "that it says what runs (docs/deploying.md, Upgrading)"
                if reserved is not None
                else "redeploy the stack (sam deploy)",
            )
        ]
    unreserved = limits.get("UnreservedConcurrentExecutions")
    if reserved is None and quota is not None and unreserved is not None:
        room = int(unreserved) - min(UNRESERVED_FLOOR, int(quota))  # what a reservation may take
        if room < 2:  # the event source's minimum
            account = "a new account's quota; " if int(quota) <= NEW_ACCOUNT_QUOTA else ""
            return [
                Result(
                    CHECK,
                    subject,
                    Status.WARN,
                    f"{figures}: {account}Lambda keeps {min(UNRESERVED_FLOOR, int(quota))} of it "
                    "unreserved, so no ConsumerReservedConcurrency can be deployed and every function "
                    "shares the rest",
                    QUOTA_FIX,
                )
            ]
    return [Result(CHECK, subject, Status.OK, figures)]
