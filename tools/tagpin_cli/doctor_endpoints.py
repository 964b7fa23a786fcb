"""``tagpin doctor``'s checks of what answers from outside: each registry (a HEAD of one followed tag
with its credentials), the console and the webhook (unauthenticated requests must answer 401), the
alarm topic's subscriptions, the dead-letter queues."""

from __future__ import annotations

from typing import Any

from tagpin_cli.doctor_report import Result, Seat, Status, _short


def check_registries(seat: Seat) -> list[Result]:
    from tagpin import wiring
    from tagpin.adapters.registry.credentials import CredentialsError
    from tagpin.ports.registry import AuthError, ManifestNotFound, RegistryError

    by_host: dict[str, Any] = {}
    for followed in seat.followed:
        by_host.setdefault(followed.ref.registry, followed)
    results = []
    for host, followed in sorted(by_host.items()):
        settings = seat.config.registry(host)
        secret = settings.credentials_secret
        resolve = f"tagpin resolve {followed.image}"
        try:
            access = wiring.registry_access(host)
            resolution = wiring.registry_client().resolve(followed.ref)
        except AuthError as exc:
            fix = (
                f"check the username and password in the secret {secret} (docs/registries.md), then {resolve}"
                if secret
                else f"the registry wants credentials: set registries.{host}.credentials_secret "
                "(docs/registries.md)"
            )
            results.append(Result("registry", host, Status.FAIL, f"credentials refused: {_short(exc)}", fix))
            continue
        except ManifestNotFound:
            results.append(
                Result(
                    "registry",
                    host,
                    Status.WARN,
                    f"answers, but {followed.image} does not exist (not pushed yet?)",
                    f"push the tag, or fix the image name; then {resolve}",
                )
            )
            continue
        except (RegistryError, CredentialsError) as exc:
            results.append(
                Result(
                    "registry",
                    host,
                    Status.FAIL,
                    _short(exc),
                    f"check the registry's address, network access and TLS (registries.{host}); "
                    f"then {resolve}",
                )
            )
            continue
        auth = "with credentials" if access.credentials else "anonymously"
        results.append(
            Result(
                "registry",
                host,
                Status.OK,
                f"{resolution.method} {followed.ref.repository}:{followed.ref.tag} {auth} -> "
                f"{resolution.digest[:19]}…",
            )
        )
    return results


def check_console(seat: Seat) -> list[Result]:
    """The console's routes are behind the JWT authorizer: a request without a token answers 401."""
    import httpx

    url = seat.stack.console_url or ""
    if not url:
        return [Result("console", "-", Status.SKIP, "no console (ConsoleJwtIssuer is empty)")]
    try:
        response = httpx.get(url + "/targets", timeout=15)
    except httpx.HTTPError as exc:
        return [Result("console", url, Status.FAIL, f"no answer: {_short(exc)}", "check the HTTP API")]
    answer = f"a request without a token answered {response.status_code}"
    if response.status_code == 401:
        return [Result("console", url, Status.OK, answer + " (nothing is readable without signing in)")]
    return [
        Result(
            "console",
            url,
            Status.FAIL,
            f"{answer}, not 401",
            "every console route must be behind the JWT authorizer: redeploy the template (docs/console.md)",
        )
    ]


def check_webhook(seat: Seat) -> list[Result]:
    import httpx

    base = seat.stack.webhook_url
    if not base:
        return [Result("webhook", "-", Status.SKIP, "the stack has no webhook URL output")]
    url = base.rstrip("/") + "/distribution"
    try:  # no credentials: the function must refuse it before reading or enqueueing anything
        response = httpx.post(url, content=b"{}", headers={"content-type": "application/json"}, timeout=15)
    except httpx.HTTPError as exc:
        return [
            Result(
                "webhook", url, Status.FAIL, f"no answer: {_short(exc)}", "check the HTTP API (WebhookApi)"
            )
        ]
    answer = f"an unauthenticated POST answered {response.status_code}"
    if response.status_code == 401:
        return [Result("webhook", url, Status.OK, answer + " (the route and the function work)")]
    if response.status_code == 503:
        body = response.text[:200]
        return [
            Result(
                "webhook",
                url,
                Status.FAIL,
                f"{answer}: {body}",
                "create the webhook secret and the configuration",
            )
        ]
    if response.status_code == 404:
        return [
            Result(
                "webhook", url, Status.FAIL, answer, "the route POST /webhooks/{source} is missing: redeploy"
            )
        ]
    return [
        Result(
            "webhook",
            url,
            Status.FAIL,
            f"{answer}, not 401",
            "read the webhook function's log (docs/troubleshooting.md)",
        )
    ]


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
