"""``tagpin doctor``'s HTTP checks: what a stranger reaches. The webhook must refuse an
unauthenticated POST (401) before reading anything; every console route is behind the JWT
authorizer (401 without a token); where Slack's approval buttons are set up (a
``slack_signing_secret`` in the notification secret), ``SlackActionsUrl`` refuses an unsigned POST
(401 or 403), which shows the route is there: a Slack app whose Request URL is another address (the
webhook API's, before the console had an API of its own) gets 404s, and its approvals lapse.
"""

from __future__ import annotations

from tagpin_cli.doctor_seat import Result, Seat, Status, short


def check_console(seat: Seat) -> list[Result]:
    """The console's routes are behind the JWT authorizer: a request without a token answers 401."""
    import httpx

    url = seat.stack.console_url or ""
    if not url:
        return [Result("console", "-", Status.SKIP, "no console (ConsoleJwtIssuer is empty)")]
    try:
        response = httpx.get(url + "/targets", timeout=15)
    except httpx.HTTPError as exc:
        return [Result("console", url, Status.FAIL, f"no answer: {short(exc)}", "check the HTTP API")]
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
            Result("webhook", url, Status.FAIL, f"no answer: {short(exc)}", "check the HTTP API (WebhookApi)")
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


SLACK_FIX = (
    "set the Slack app's Request URL (Interactivity & Shortcuts) to the stack's SlackActionsUrl "
    "output (docs/approvals.md; it moved to ConsoleApi: docs/deploying.md, Upgrading)"
)


def slack_actions_url(seat: Seat) -> str:
    """Where Slack posts button clicks: the ``SlackActionsUrl`` output, or the local console's."""
    url = seat.stack.outputs.get("SlackActionsUrl", "")
    console = seat.stack.console_url or ""
    if not url and seat.local and console:
        url = console.removesuffix("/console") + "/slack/actions"
    return url


def check_slack(seat: Seat) -> list[Result]:
    """Slack's approval buttons reach the console: an unsigned POST to ``SlackActionsUrl`` answers
    401 or 403 (refused before anything is read) when Slack is set up."""
    import httpx
    from tagpin import wiring

    name = seat.config.rollout.notifications.webhooks_secret
    if not name:
        return [Result("slack", "-", Status.SKIP, "no notification secret (rollout.notifications)")]
    try:
        hooks = wiring.secret_json(name)
    except Exception as exc:
        return [Result("slack", name, Status.SKIP, f"not checked: {short(exc)}", "see the secret check")]
    if not hooks.get("slack_signing_secret"):
        return [Result("slack", "-", Status.SKIP, f"no slack_signing_secret in {name}: no approval buttons")]
    url = slack_actions_url(seat)
    if not url:
        return [
            Result(
                "slack",
                "-",
                Status.FAIL,
                "Slack's approval buttons are set up (slack_signing_secret), but the stack has no console: "
                "nothing answers their clicks, and every approval lapses",
                "deploy with ConsoleJwtIssuer (docs/console.md), then " + SLACK_FIX,
            )
        ]
    try:  # unsigned: refused before anything is read or decided
        response = httpx.post(
            url,
            content=b"payload=%7B%7D",
            headers={"content-type": "application/x-www-form-urlencoded"},
            timeout=15,
        )
    except httpx.HTTPError as exc:
        return [
            Result("slack", url, Status.FAIL, f"no answer: {short(exc)}", "check the HTTP API (ConsoleApi)")
        ]
    answer = f"an unsigned POST answered {response.status_code}"
    refusal = response.text[:200]
    if response.status_code in (401, 403) and "not configured" not in refusal:
        return [
            Result(
                "slack",
                url,
                Status.OK,
                f"{answer} (the route is there and checks Slack's signature); the Slack app's Request "
                "URL must be this address",
            )
        ]
    if response.status_code in (401, 403):
        return [
            Result(
                "slack",
                url,
                Status.FAIL,
                f"{answer}: {refusal}",
                f"the console function cannot read slack_signing_secret in {name}: check its role "
                "(NotificationSecrets) and the secret check",
            )
        ]
    return [
        Result(
            "slack", url, Status.FAIL, f"{answer}, not 401 or 403", "redeploy the template; then " + SLACK_FIX
        )
    ]
