"""The composition root's side for people: the console (and Slack's buttons), holds, the dead-letter
queue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tagpin import wiring
from tagpin.adapters.secrets import SecretNotFound
from tagpin.wiring.cache import cached
from tagpin.wiring.detection import change_queue

if TYPE_CHECKING:
    from tagpin.console.app import ConsoleApp
    from tagpin.usecases.deadletters import DeadLetterQueue
    from tagpin.usecases.holds import Holds


def holds() -> Holds:
    """A person holding a target where it is, or releasing a hold (CLI)."""
    from tagpin.usecases.holds import Holds

    return Holds(wiring.state(), wiring.followed, change_queue(), wiring.clock)


def dead_letters(dead_letter_queue_url: str | None = None, queue_url: str | None = None) -> DeadLetterQueue:
    """The dead-letter queue, for a person: a look (the console) and a redrive (CLI, console)."""
    from tagpin.adapters.sqs import SqsDeadLetters
    from tagpin.usecases.deadletters import DeadLetterQueue

    return DeadLetterQueue(
        SqsDeadLetters(
            wiring.aws("sqs"),
            dead_letter_queue_url or wiring.setting("dead_letter_queue_url"),
            queue_url or wiring.setting("queue_url"),
        )
    )


@cached
def console_app() -> ConsoleApp:
    """The console function's routes, pages and actions (``tagpin.console``)."""
    from tagpin.adapters.web.auth import JwtAuth, TokenAuth
    from tagpin.adapters.web.render import Renderer
    from tagpin.console.app import ConsoleApp
    from tagpin.settings import ConsoleAuth
    from tagpin.usecases.console import Console

    current = wiring.settings()
    auth: JwtAuth | TokenAuth = JwtAuth()
    if current.console_auth is ConsoleAuth.TOKEN:
        assert current.console_token is not None and current.console_session_key is not None  # checked
        from tagpin.adapters.dynamodb.sessions import DynamoSignOuts
        from tagpin.adapters.dynamodb.table import Table

        auth = TokenAuth(
            current.console_token.get_secret_value(),
            current.console_session_key.get_secret_value().encode(),
            DynamoSignOuts(Table(wiring.aws("dynamodb"), wiring.setting("state_table"))),
        )
    console = Console(
        config=wiring.config,
        state=wiring.state(),
        followed=wiring.followed,
        holds=wiring.holds,
        dead_letters=wiring.dead_letters,
        approvals=wiring.approvals,
        admission=wiring.console_admission,
    )
    return ConsoleApp(
        console, auth, Renderer(), slack_secret=wiring.slack_signing_secret, slack_reply=wiring.slack_reply
    )


def slack_signing_secret() -> str | None:
    """The Slack app's signing secret: ``slack_signing_secret`` in the notification secret."""
    name = wiring.config().rollout.notifications.webhooks_secret
    if name is None:
        return None
    try:
        value = wiring.secret_json(name).get("slack_signing_secret")
    except SecretNotFound:
        return None
    return value if isinstance(value, str) and value else None


def slack_reply(url: str, message: dict[str, Any]) -> None:
    """Update the message a Slack button was clicked in (its ``response_url``).

    The same stdlib POST the notifier uses: the console's layer does not carry httpx (the
    registry client's aiohttp lives in the poller's and consumer's layer only)."""
    from tagpin.adapters.notify import post_json

    post_json(url, message)
