"""Text from outside, as the CLI shows it: a registry's answer, a cluster's, a failed run's error
message are stored by the functions and printed by `tagpin status`, `history`, `plan`, `redrive`
and `doctor`. Whatever that text holds (an escape sequence that clears the screen or retitles the
terminal, a bell, a carriage return, a newline that would forge a row, a bidi override), a table
or a line shows it inert, each such character as its escape (``\\x1b``, ``\\n``), and with --json
the document keeps the text exactly."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tagpin.adapters.dynamodb.history import DETAIL_LIMIT, DynamoHistory
from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

from tests.support.cli import Cli, Ran, document, endpoints_file, printed, tagpin
from tests.support.stack import drain, own_queues, state_of

pytestmark = pytest.mark.e2e

TARGET = "local/default/Deployment/web/web"
# ESC [2J clears the screen, ESC ] 0 ; ... BEL retitles the terminal, CR returns to the line's start,
# a newline and box characters would forge a row, U+202E reverses what follows; a name's ZWNJ, a
# no-break space and an emoji's ZWJ are text, shown as they are (LEGIBLE)
LEGIBLE = "Ali\u200cReza\xa0\U0001f469\u200d\U0001f4bb"
HOSTILE = "\x1b[2J\x1b]0;owned\x07evil\rline one\n│ prod/x │ current │\u202eboom " + LEGIBLE
SHOWN = "\\x1b[2J\\x1b]0;owned\\x07evil\\rline one\\n│ prod/x │ current │\\u202eboom " + LEGIBLE
RAW = ("\x1b", "\x07", "\r", "\u202e")  # none of these may reach the terminal


@pytest.fixture(scope="module")
def cli(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    yield Cli(stack, endpoints_file(stack, tmp_path_factory.mktemp("cli") / "endpoints.json"))


def inert(ran: Ran, code: int = 0) -> str:
    """stdout of a run that exited ``code``, with the hostile text shown escaped and no raw control
    character but the newlines that end its lines."""
    out = printed(ran, code)
    assert not [c for c in RAW if c in out], repr(out[-800:])
    assert SHOWN in out, repr(out[-800:])
    return out


def test_text_from_a_registry_and_a_cluster_is_shown_inert(stack: LocalStack, cli: Cli) -> None:
    """The tag's last error (what the registry answered) and a target's history detail (what the
    cluster answered) hold the hostile text: status, history and plan show it inert, --json keeps it."""
    assert stack.registry is not None
    web = f"{stack.registry.host}/demo/web:stable"
    digest = push_image(stack.registry.url, "demo/web", "stable")
    stack.run_poller()
    drain(stack)
    state = state_of(stack)
    now = int(time.time() * 1000)
    state.tags.record_error(FollowedKey(web), f"RegistryError: {HOSTILE}", now)
    history = state.history
    assert isinstance(history, DynamoHistory)
    history.target_item(
        TARGET,
        now,
        (digest.rsplit(":", 1)[-1][:12], "failed"),
        {"digest": digest, "status": "failed", "trigger": "poll", "detail": HOSTILE},
        DETAIL_LIMIT,
    )
    # held by a person whose name (an identity provider's claim, shown by the console) is hostile,
    # and the tag moved on: plan says why the target stays
    state.targets.hold(TARGET, "", now, reason=f"held by {HOSTILE}", trigger=Trigger.MANUAL)
    push_image(stack.registry.url, "demo/web", "stable")
    try:
        status, trail, as_json, trail_json = cli.many(
            ["status"],
            ["history", TARGET, "--limit", "5"],
            ["--json", "status"],
            ["--json", "history", TARGET],
        )
        # a terminal wide enough for the plan's digests and its detail on one line each
        plan = tagpin("--endpoints", str(cli.endpoints), "plan", env={"COLUMNS": "1000"})
    finally:
        state.targets.release(TARGET, int(time.time() * 1000), reason="released", trigger=Trigger.MANUAL)
    inert(status)
    inert(trail)
    inert(plan)
    (row,) = [r for r in document(as_json) if r["image"] == web]
    assert row["error"] == f"RegistryError: {HOSTILE}"
    assert HOSTILE in [e["detail"] for e in document(trail_json)]
    # the detail's newline forged no row: its text stays on the line it belongs to
    forged = [line for line in trail.out.splitlines() if "│ prod/x │" in line and "line one\\n│" not in line]
    assert forged == [], forged


def test_a_failed_run_s_error_message_is_one_inert_line(stack: LocalStack, cli: Cli, tmp_path: Path) -> None:
    """A failed run's error message (an exception's text, which may quote a registry) is listed by
    `tagpin redrive` as one line per record, inert."""
    queue, dead_letters = own_queues(stack)
    endpoints = endpoints_file(
        stack, tmp_path / "e.json", queue_url=queue, dead_letter_queue_url=dead_letters
    )
    record = {
        "detail-type": "Lambda Function Invocation Result - Failure",
        "time": "2026-11-28T10:00:00Z",
        "detail": {
            "timestamp": "2026-11-28T10:00:00.000Z",
            "requestContext": {
                "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:tagpin-poller:$LATEST",
                "condition": "RetriesExhausted",
            },
            "responsePayload": {"errorType": "RegistryError", "errorMessage": HOSTILE},
        },
    }
    stack.client("sqs").send_message(
        QueueUrl=dead_letters,
        MessageBody=json.dumps(record),
        MessageGroupId="failed-invocations",
        MessageDeduplicationId="hostile",
    )
    out = inert(cli("redrive", endpoints=endpoints))
    (line,) = [line for line in out.splitlines() if "tagpin-poller" in line]
    assert line.endswith(f"RegistryError: {SHOWN}")


class _Hostile(BaseHTTPRequestHandler):
    """A webhook URL whose server answers a POST with 503 and the hostile text as its body."""

    def do_POST(self) -> None:
        body = HOSTILE.encode()
        self.send_response(503)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


def test_doctor_shows_what_a_server_answered_inert(stack: LocalStack, cli: Cli, tmp_path: Path) -> None:
    """`tagpin doctor` quotes what the webhook URL answered: in its table, inert; with --json, exact."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hook = f"http://127.0.0.1:{server.server_address[1]}/webhooks/{{source}}"
        endpoints = endpoints_file(stack, tmp_path / "e.json", webhook_url=hook)
        # a terminal wide enough for the answer on one line whatever the other checks say (at 250
        # columns a long fix in another row narrowed the detail column and wrapped it: CI run Y1)
        table, as_json = cli.many(["doctor"], ["--json", "doctor"], endpoints=endpoints, columns=2000)
    finally:
        server.shutdown()
        server.server_close()
    inert(table, 1)
    (webhook,) = [c for c in document(as_json, 1)["checks"] if c["check"] == "webhook"]
    assert webhook["status"] == "fail" and webhook["detail"].endswith(HOSTILE)
