"""Console: a person's view of tagpin in a browser, and what they may do there (hold, release,
redrive), on the HTTP API under ``/console`` (payload v2). On AWS every route is behind the API's JWT
authorizer; the routes, the sign-in, the CSRF checks and the pages are ``tagpin.console``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import wiring
from tagpin.observability import logger, own_keys

wiring.check_settings("console")  # cold start: a missing or malformed TAGPIN_* variable stops here, named


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@own_keys
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return wiring.console_app().handle(event, context)
