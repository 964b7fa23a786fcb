"""What a person does in the console (approve, reject, hold, release, redrive), through the same use
cases as the CLI (``Approvals``, ``Holds``, ``DeadLetterQueue``).

Actions: one function each, registered in ``ACTIONS`` with ``@action("name")``; it gets the console,
who asks (the JWT's subject or e-mail on AWS, "local" locally) and the submitted form, and answers
``Done`` (a notice and where to go next) or raises ``ActionError``. The HTTP side checks the session
and the CSRF token before any action runs, so adding an action is adding one function here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import Digest
from tagpin.usecases.approvals import ApprovalOutcome, Via
from tagpin.usecases.console import Console
from tagpin.usecases.console_views import target_path

REDRIVE_LIMIT = 100  # messages one click redrives (a request has 30 s at most)
# How long the console's Hold holds (the form's ``for``: its seconds and its label); none: until
# released
HOLD_FOR: dict[str, tuple[int, str]] = {
    "1h": (3600, "for 1 hour"),
    "1d": (86400, "for 1 day"),
    "7d": (7 * 86400, "for 7 days"),
}


@dataclass(frozen=True)
class Done:
    """What an action did: a notice (a key of ``NOTICES``) and the console path to go to."""

    notice: str
    location: str
    count: int | None = None


class ActionError(ValueError):
    """The action cannot be done as asked (an unknown target, a missing field): told to the person."""


# Fixed texts: a notice shown after an action is chosen by key, never taken from the request.
NOTICES: dict[str, str] = {
    "held": "Held: tagpin leaves this target where it is until it is released.",
    "already-held": "It was held already.",
    "released": "Released: the tag's digest is being applied again.",
    "released-idle": "Released (the tag has no digest to apply yet, or it is blocked).",
    "not-held": "It was not held.",
    "redriven": "Messages sent back to the changes queue:",
    ApprovalOutcome.APPROVED: "Approved: the wave starts (through every other gate).",
    ApprovalOutcome.REJECTED: "Rejected: the digest is marked bad; nothing rolls.",
    ApprovalOutcome.NOTHING_WAITING: (
        "Nothing waits for a decision on this image (decided or lapsed already)."
    ),
    ApprovalOutcome.STALE: "Not done: a newer digest supersedes the one you decided on.",
    ApprovalOutcome.ALREADY_DECIDED: "Decided already (a second click, or the request lapsed): nothing done.",
}


# -- actions -------------------------------------------------------------------------------------

Action = Callable[[Console, str, Mapping[str, str]], Done]
ACTIONS: dict[str, Action] = {}


def action(name: str) -> Callable[[Action], Action]:
    """Register an action under ``name`` (``POST /console/actions/<name>``)."""

    def register(fn: Action) -> Action:
        ACTIONS[name] = fn
        return fn

    return register


def _field(form: Mapping[str, str], name: str) -> str:
    value = form.get(name, "").strip()
    if not value:
        raise ActionError(f"{name} is missing")
    return value


def _typed[T](form: Mapping[str, str], name: str, of: Callable[[str], T]) -> T:
    """The form's ``name`` as the value it names (``FollowedKey``, ``Digest``): a clear error when
    it is none."""
    try:
        return of(_field(form, name))
    except ValueError as exc:
        raise ActionError(f"{name}: {exc}") from None


def _key(form: Mapping[str, str]) -> FollowedKey | None:
    """The form's optional ``image``: the followed tag or channel it names, or None."""
    return _typed(form, "image", FollowedKey) if form.get("image", "").strip() else None


@action("hold")
def hold(console: Console, who: str, form: Mapping[str, str]) -> Done:
    """Hold a target until released, or for one of ``HOLD_FOR``'s durations (the form's ``for``)."""
    target = _field(form, "target")
    duration = form.get("for", "").strip()
    if duration and duration not in HOLD_FOR:
        raise ActionError("for: one of " + ", ".join(HOLD_FOR))
    until = console.clock() + HOLD_FOR[duration][0] * 1000 if duration else None
    try:
        held = console.holds().hold(target, who, until, image=_key(form))
    except LookupError as exc:
        raise ActionError(str(exc)) from None
    return Done("held" if held else "already-held", target_path(target, _key(form)))


@action("release")
def release(console: Console, who: str, form: Mapping[str, str]) -> Done:
    target = _field(form, "target")
    try:
        done = console.holds().release(target, who, image=_key(form))
    except LookupError as exc:
        raise ActionError(str(exc)) from None
    notice = "not-held" if not done.released else "released" if done.healing else "released-idle"
    return Done(notice, target_path(target, _key(form)))


def _decide(console: Console, who: str, form: Mapping[str, str], approve: bool) -> Done:
    image, digest = _typed(form, "image", FollowedKey), _typed(form, "digest", Digest)
    wave = form.get("wave", "").strip() or None  # the wave the page listed: a later one is not decided
    decided = console.approvals().decide(image, approve, who, via=Via.CONSOLE, digest=digest, wave=wave)
    return Done(decided.decision.value, "/console")


@action("approve")
def approve(console: Console, who: str, form: Mapping[str, str]) -> Done:
    return _decide(console, who, form, approve=True)


@action("reject")
def reject(console: Console, who: str, form: Mapping[str, str]) -> Done:
    return _decide(console, who, form, approve=False)


@action("redrive")
def redrive(console: Console, who: str, form: Mapping[str, str]) -> Done:
    done = console.dead_letters().redrive(REDRIVE_LIMIT)
    return Done("redriven", "/console/dead-letters", count=done.moved + len(done.failed_runs))
