"""The console over the HTTP API (payload 2.0), on powertools' ``APIGatewayHttpResolver``.

Every answer carries the security headers (``SECURITY_HEADERS``: a Content-Security-Policy that
allows no inline script or style and no other origin, nosniff, no referrer, no framing, HTTPS only
(HSTS), no caching of pages). Every page but the sign-in page (local only) and the static files
needs a signed-in person (``tagpin.adapters.web.auth``); without one the answer is 401, whatever
the path. Every POST but the sign-in needs the session's CSRF token in the form (``csrf``),
compared in constant time:
without it, or with another session's, the answer is 403 and nothing is done. Actions are the
functions of ``tagpin.usecases.console_actions.ACTIONS``; after one the browser is sent on (303) to a page
of the console with a notice chosen by key.

``POST /slack/actions`` is Slack's: an approval request's Approve / Reject button. It has no
session and no authorizer (Slack sends no JWT): the request is verified with the Slack app's signing
secret (``slack_signing_secret`` in the notification secret; HMAC SHA-256 over
``v0:<timestamp>:<body>``, constant time, five minutes; ``tagpin.adapters.slack.actions``) before
anything of it is read; without that secret configured the route answers 401. The decision is the
console's (``Approvals.decide``, ``via slack``, who = the Slack user), and the message is updated
through the interaction's ``response_url``, only when that is Slack's own host.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.shared.cookies import Cookie, SameSite

from tagpin.adapters.dynamodb.table import KeyTooLong
from tagpin.adapters.notify import slack_escape
from tagpin.adapters.slack.actions import MAX_BODY as SLACK_MAX_BODY
from tagpin.adapters.slack.actions import SlackRefused, read, verify
from tagpin.adapters.web.auth import COOKIE, Auth, Principal, TokenAuth, same, secure_cookies
from tagpin.adapters.web.render import Renderer
from tagpin.console.requests import (
    BadRequest,
    Forbidden,
    HttpError,
    NotFound,
    Unauthorized,
    body_of,
    form,
    key_shaped,
)
from tagpin.domain.channels import FollowedKey
from tagpin.usecases.approvals import Via
from tagpin.usecases.console import PAGE_SIZE, Console, overview
from tagpin.usecases.console_actions import ACTIONS, HOLD_FOR, NOTICES, REDRIVE_LIMIT, ActionError

log = logging.getLogger(__name__)

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # HTTPS only from here on (API Gateway serves nothing else; a browser ignores it over the local
    # stack's plain HTTP). No includeSubDomains: the console's host may be a custom domain whose
    # other names are not ours to decide.
    "Strict-Transport-Security": "max-age=31536000",
}
HTML = "text/html; charset=utf-8"
COUNT = re.compile(r"[0-9]{1,9}")  # a notice's count (``str.isdigit`` accepts "²", which int() refuses)
SLACK_HOST = "hooks.slack.com"  # a response_url elsewhere is not followed (no request forgery)


class ConsoleApp:
    def __init__(
        self,
        console: Console,
        auth: Auth,
        renderer: Renderer,
        *,
        slack_secret: Callable[[], str | None] = lambda: None,
        slack_reply: Callable[[str, dict[str, Any]], None] = lambda url, message: None,
    ) -> None:
        self.console = console
        self.auth = auth
        self.renderer = renderer
        # the Hold buttons' choices: until released, or one of the use case's durations
        renderer.env.globals["hold_for"] = [("", "until released")] + [
            (key, label) for key, (_, label) in HOLD_FOR.items()
        ]
        self.slack_secret = slack_secret
        self.slack_reply = slack_reply
        app = self.resolver = APIGatewayHttpResolver()
        pages: dict[str, Callable[[Principal], Response[str]]] = {
            "/console": self._overview,
            "/console/": self._overview,
            "/console/images": self._images,
            "/console/image": self._image,
            "/console/targets": self._targets,
            "/console/target": self._target,
            "/console/holds": self._holds,
            "/console/dead-letters": self._dead_letters,
        }
        for path, page in pages.items():
            app.get(path)(self._page(page))
        app.get("/console/static/<name>")(self._static)
        app.get("/console/signin")(self._signin_page)
        app.post("/console/signin")(self._signin)
        app.post("/console/signout")(self._signout)
        app.post("/console/actions/<name>")(self._act)
        app.post("/slack/actions")(self._slack)
        app.not_found()(self._not_found)
        app.exception_handler(HttpError)(self._http_error)
        app.exception_handler(KeyTooLong)(self._key_too_long)
        app.exception_handler(Exception)(self._failure)

    def handle(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        response = self.resolver.resolve(event, context)
        headers = response.setdefault("headers", {})
        headers.update(SECURITY_HEADERS)
        headers.setdefault("Cache-Control", "no-store")
        return response

    # -- plumbing ---------------------------------------------------------------------------------
    @property
    def event(self) -> Any:
        return self.resolver.current_event

    def _principal(self) -> Principal | None:
        return self.auth.principal(self.event.raw_event)

    def _require(self) -> Principal:
        principal = self._principal()
        if principal is None:
            raise Unauthorized(
                "Sign in first."
                if self.auth.signs_in
                else "No identity: the JWT authorizer passed no claims."
            )
        return principal

    def _query(self, name: str) -> str | None:
        value = (self.event.query_string_parameters or {}).get(name)
        return None if value is None else key_shaped(name, str(value))

    def _form(self) -> dict[str, str]:
        return form(self.event.body, self.event.is_base64_encoded)

    def _html(self, template: str, status: int = 200, **context: Any) -> Response[str]:
        body = self.renderer.page(template, signs_in=self.auth.signs_in, **context)
        return Response(status, HTML, body)

    def _notice(self) -> str | None:
        text = NOTICES.get(self._query("notice") or "")
        count = self._query("n") or ""
        if text and COUNT.fullmatch(count):
            text += f" {int(count)}"
        return text

    def _page(self, page: Callable[[Principal], Response[str]]) -> Callable[[], Response[str]]:
        def handler() -> Response[str]:
            return page(self._require())

        return handler

    # -- pages ------------------------------------------------------------------------------------
    def _overview(self, principal: Principal) -> Response[str]:
        return self._html(
            "overview.html",
            principal=principal,
            here="overview",
            notice=self._notice(),
            overview=overview(self.console),
        )

    def _cursor(self) -> str | None:
        return self._query("after") or None

    def _images(self, principal: Principal) -> Response[str]:
        try:
            page = self.console.images(self._cursor())
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        return self._html("images.html", principal=principal, here="images", notice=self._notice(), page=page)

    def _image(self, principal: Principal) -> Response[str]:
        ref = self._query("ref") or ""
        try:
            view = self.console.image(FollowedKey(ref))
        except (LookupError, ValueError):  # ValueError: no followed tag's or channel's key
            raise NotFound("That image is not followed.") from None
        return self._html("image.html", principal=principal, here="images", notice=self._notice(), view=view)

    def _targets(self, principal: Principal) -> Response[str]:
        try:
            page = self.console.targets(self._cursor())
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        return self._html(
            "targets.html",
            principal=principal,
            here="targets",
            notice=self._notice(),
            page=page,
            size=PAGE_SIZE,
        )

    def _target(self, principal: Principal) -> Response[str]:
        image = self._query("image")
        try:
            view = self.console.target(self._query("id") or "", FollowedKey(image) if image else None)
        except (LookupError, ValueError):
            raise NotFound("That target is not followed.") from None
        return self._html(
            "target.html", principal=principal, here="targets", notice=self._notice(), view=view
        )

    def _holds(self, principal: Principal) -> Response[str]:
        rows = self.console.held()
        return self._html("holds.html", principal=principal, here="holds", notice=self._notice(), rows=rows)

    def _dead_letters(self, principal: Principal) -> Response[str]:
        return self._html(
            "deadletters.html",
            principal=principal,
            here="dead-letters",
            notice=self._notice(),
            look=self.console.dead_letter_view(),
            limit=REDRIVE_LIMIT,
        )

    def _static(self, name: str) -> Response[str]:
        asset = self.renderer.asset(name)
        if asset is None:
            return self._not_found()
        headers = {"Cache-Control": "public, max-age=31536000, immutable"}
        return Response(200, asset.content_type, asset.body, headers)

    # -- signing in (the local stack) -------------------------------------------------------------
    def _token_auth(self) -> TokenAuth:
        if not isinstance(self.auth, TokenAuth):
            raise NotFound("There is no sign-in page here: the HTTP API's JWT authorizer signs people in.")
        return self.auth

    def _signin_page(self) -> Response[str]:
        self._token_auth()
        if self._principal() is not None:
            return _see_other("/console")
        return self._html("signin.html", principal=None, here="signin", notice=None, failed=False)

    def _signin(self) -> Response[str]:
        auth = self._token_auth()
        if not auth.check_token(self._form().get("token", "")):
            log.warning("console sign-in refused")
            return self._html("signin.html", 401, principal=None, here="signin", notice=None, failed=True)
        cookie = self._cookie(auth.issue(), auth.ttl_s)
        log.info("console sign-in")
        return _see_other("/console", cookies=[cookie])

    def _signout(self) -> Response[str]:
        auth = self._token_auth()
        principal = self._require()
        self._check_csrf(principal, self._form())
        auth.sign_out(self.event.raw_event)  # on the server: a copy of the cookie is refused too
        log.info("console sign-out")
        return _see_other("/console/signin", cookies=[self._cookie("", 0)])

    def _cookie(self, value: str, max_age: int) -> Cookie:
        return Cookie(
            name=COOKIE,
            value=value,
            path="/console",
            secure=secure_cookies(self.event.raw_event),
            http_only=True,
            max_age=max_age,
            same_site=SameSite.STRICT_MODE,
        )

    # -- actions ----------------------------------------------------------------------------------
    def _check_csrf(self, principal: Principal, form: Mapping[str, str]) -> None:
        if not same(principal.csrf, form.get("csrf", "")):
            log.warning("console request refused: no CSRF token of this session")
            raise Forbidden("This form is not from your session (its CSRF token is missing or another's).")

    def _act(self, name: str) -> Response[str]:
        principal = self._require()
        form = self._form()
        self._check_csrf(principal, form)
        action = ACTIONS.get(name)
        if action is None:
            raise NotFound("There is no such action.")
        try:
            done = action(self.console, principal.who, form)
        except ActionError as exc:
            raise BadRequest(str(exc)) from None
        log.info("console action", extra={"action": name, "who": principal.who, "notice": done.notice})
        query = {"notice": done.notice} | ({"n": str(done.count)} if done.count is not None else {})
        separator = "&" if "?" in done.location else "?"
        return _see_other(done.location + separator + urlencode(query))

    # -- Slack ------------------------------------------------------------------------------------
    def _slack(self) -> Response[str]:
        secret = self.slack_secret()
        try:
            body = body_of(self.event.body, self.event.is_base64_encoded, SLACK_MAX_BODY)
            if not secret:
                raise SlackRefused(401, "Slack approvals are not configured (slack_signing_secret)")
            verify(dict(self.event.headers or {}), body, secret, time.time())
            click = read(body)
            key_shaped("image", click.image)
        except HttpError as exc:
            return Response(exc.status, "text/plain; charset=utf-8", exc.message)
        except SlackRefused as exc:
            log.warning("Slack request refused", extra={"status": exc.status, "reason": exc.message})
            return Response(exc.status, "text/plain; charset=utf-8", exc.message)
        decided = self.console.approvals().decide(
            click.image,
            click.approve,
            click.user,
            via=Via.SLACK,
            digest=click.digest,
            wave=click.wave or None,  # a button posted without its wave decides the one waiting
        )
        log.info(
            "Slack decision", extra={"decision": decided.decision, "who": click.user, "image": click.image}
        )
        text = slack_escape(
            f"{NOTICES[decided.decision]} {click.image}@{click.digest[:19]} (by {click.user})"
        )
        message = {"replace_original": True, "text": text}
        if click.response_url is not None and urlsplit(click.response_url).hostname == SLACK_HOST:
            try:
                self.slack_reply(click.response_url, message)
            except Exception:  # the decision stands; the message keeps its buttons (a click answers again)
                log.warning("Slack message not updated", exc_info=True)
        return Response(200, "application/json", json.dumps(message))

    # -- errors -----------------------------------------------------------------------------------
    def _not_found(self, exc: Exception | None = None) -> Response[str]:
        principal = self._principal()
        if principal is None:
            return self._http_error(Unauthorized("Sign in first."))
        return self._error(NotFound("There is no such page."), principal)

    def _http_error(self, exc: HttpError) -> Response[str]:
        principal = None if isinstance(exc, Unauthorized) else self._principal()
        return self._error(exc, principal)

    def _error(self, exc: HttpError, principal: Principal | None) -> Response[str]:
        response = self._html(
            "error.html",
            exc.status,
            principal=principal,
            here="",
            notice=None,
            code=exc.status,
            title=exc.title,
            message=exc.message,
            sign_in=isinstance(exc, Unauthorized) and self.auth.signs_in,
        )
        if isinstance(exc, Unauthorized) and not self.auth.signs_in:
            response.headers["WWW-Authenticate"] = "Bearer"
        return response

    def _key_too_long(self, exc: KeyTooLong) -> Response[str]:
        """What the edge's checks (``_key_shaped``) missed, refused by the table before AWS is asked."""
        return self._http_error(BadRequest(f"Too long for a key: {exc}."))

    def _failure(self, exc: Exception) -> Response[str]:
        log.exception("console request failed")
        error = HttpError("Something went wrong; the function's log has the details.")
        return self._error(error, None)


def _see_other(location: str, cookies: list[Cookie] | None = None) -> Response[str]:
    if not location.startswith("/console") or location.startswith("//"):
        raise ValueError(f"not a console path: {location!r}")
    return Response(303, HTML, "", {"Location": location}, cookies=cookies)
