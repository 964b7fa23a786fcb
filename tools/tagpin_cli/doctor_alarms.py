"""``tagpin doctor``'s checks of what tells someone that something failed: the alarm topic has a
confirmed subscription; the dead-letter queue is empty, and so is the queue of undelivered events.
"""

from __future__ import annotations

from tagpin_cli.doctor_seat import Result, Seat, Status


def check_alarms(seat: Seat) -> list[Result]:
    from tagpin import wiring

    topic = seat.stack.alarm_topic_arn
    if not topic:
        return [Result("alarms", "-", Status.SKIP, "the stack has no alarm topic output (AlarmTopicArn)")]
    subscriptions = wiring.aws("sns").list_subscriptions_by_topic(TopicArn=topic).get("Subscriptions", [])
    confirmed = [s for s in subscriptions if s.get("SubscriptionArn", "").startswith("arn:")]
    pending = len(subscriptions) - len(confirmed)
    subscribe = (
        "deploy with AlarmEmail=<address>, or: aws sns subscribe --topic-arn "
        f"{topic} --protocol email --notification-endpoint <address>"
    )
    if confirmed:
        protocols = ", ".join(sorted({s.get("Protocol", "?") for s in confirmed}))
        return [
            Result("alarms", topic, Status.OK, f"{len(confirmed)} confirmed subscription(s) ({protocols})")
        ]
    if pending:
        return [
            Result(
                "alarms",
                topic,
                Status.WARN,
                f"{pending} subscription(s) pending",
                "confirm the email AWS sent",
            )
        ]
    return [Result("alarms", topic, Status.WARN, "no subscription: nobody hears the alarms", subscribe)]


# What each dead-letter queue holds, by the stack output that names it (the local stack has one).
DEAD_LETTERS = {
    "ChangesDeadLetterQueueUrl": (
        "dead-letter queue",
        "change(s) or verification(s) that failed every receive, or failed run(s)",
        "tagpin redrive (moves changes and verifications back, lists and clears failed runs)",
    ),
    "EventsDeadLetterQueueUrl": (
        "undelivered events",
        "schedule(s) or ECR event(s) EventBridge could not deliver (a removed permission or function?)",
        "redeploy the stack (sam deploy), then purge the queue; the next scheduled run repeats the work",
    ),
}


def check_dead_letters(seat: Seat) -> list[Result]:
    from tagpin import wiring

    outputs = seat.stack.outputs
    queues = [(outputs[k], *v) for k, v in DEAD_LETTERS.items() if outputs.get(k)] or [
        (seat.stack.dead_letter_queue_url, *DEAD_LETTERS["ChangesDeadLetterQueueUrl"])
    ]
    results = []
    for url, subject, what, fix in queues:
        attributes = wiring.aws("sqs").get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        count = int(attributes.get("ApproximateNumberOfMessages", 0))
        if count:
            results.append(
                Result(
                    "dead letters",
                    subject,
                    Status.WARN,
                    f"{count} {what}",
                    f"find the cause (docs/troubleshooting.md), then: {fix}",
                )
            )
        else:
            results.append(Result("dead letters", subject, Status.OK, "empty"))
    return results
