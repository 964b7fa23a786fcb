"""The console function with moto in process: sign-in, sessions, CSRF, the security headers, the pages
(hostile strings from registries, clusters and notifications rendered as text), the paging of
targets over the shards, the actions (hold, release, redrive) and the JWT authorizer's claims."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
import yaml
from tagpin import wiring
from tagpin.adapters.web.auth import TokenAuth, same
from tagpin.domain.messages import Trigger
from tagpin.ports.state import IndexEntry, TargetStatus
from tagpin_local.lambda_runtime import load_handler

from tests.support.console import (
    HOOKS,
    IMAGE,
    PARAMETER,
    SESSION_KEY,
    SLACK_SECRET,
    TARGET,
    TOKEN,
    MemorySignOuts,
    World,
    csrf_of,
    invoke,
    make_world,
    request,
    session_cookie,
    slack_request,
)
from tests.support.constants import D1, D2, REGION
from tests.support.trail import start_promotion

XSS = "<script>alert(1)</script><img src=x onerror=alert(2)>"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, dynamodb: Any, state_table: str, queues: Any) -> Iterator[World]:
    yield make_world(monkeypatch, dynamodb, queues, "token")
    wiring.reset()


@pytest.fixture
def jwt_world(
    monkeypatch: pytest.MonkeyPatch, dynamodb: Any, state_table: str, queues: Any
) -> Iterator[World]:
    yield make_world(monkeypatch, dynamodb, queues, "jwt")
    wiring.reset()


PAGES = ["/console", "/console/images", "/console/targets", "/console/holds", "/console/dead-letters",
         "/console/image", "/console/target", "/console/nowhere", "/console/actions/hold"]  # fmt: skip


# -- who may see what ------------------------------------------------------------------------------
@pytest.mark.parametrize("path", PAGES)
def test_without_a_session_every_page_is_401(world: World, path: str) -> None:
    response = world.get(path)
    assert response["statusCode"] == 401
    assert "Sign in" in response["body"]
    assert IMAGE not in response["body"]
    forged = world.get(path, cookie="abcdefghijklmnopqrstuv.9999999999." + "A" * 43)
    assert forged["statusCode"] == 401


def test_sign_in_sets_a_strict_http_only_session_cookie(world: World) -> None:
    assert world.get("/console/signin")["statusCode"] == 200
    refused = world.post("/console/signin", {"token": TOKEN + "x"})
    assert refused["statusCode"] == 401 and session_cookie(refused) is None
    response = world.post("/console/signin", {"token": TOKEN})
    (raw,) = response["cookies"]
    assert "HttpOnly" in raw and "SameSite=Strict" in raw and "Path=/console" in raw
    assert "Secure" not in raw  # plain HTTP on 127.0.0.1
    assert response["headers"]["Location"] == "/console"
    remote = world.post("/console/signin", {"token": TOKEN}, host="console.example.com", proto="https")
    assert "Secure" in remote["cookies"][0]
    page = world.get("/console", cookie=session_cookie(response))
    assert page["statusCode"] == 200 and IMAGE in page["body"]
    assert TOKEN not in page["body"] and SESSION_KEY not in page["body"]


def test_a_session_expires_and_cannot_be_altered() -> None:
    now = [1_000_000.0]
    auth = TokenAuth(TOKEN, SESSION_KEY.encode(), MemorySignOuts(), clock=lambda: now[0], ttl_s=60)
    value = auth.issue()
    event = {"cookies": [f"tagpin_session={value}"]}
    assert auth.principal(event) is not None
    sid, expiry, signature = value.split(".")
    later = f"{sid}.{int(expiry) + 3600}.{signature}"
    assert auth.principal({"cookies": [f"tagpin_session={later}"]}) is None
    other = TokenAuth(
        TOKEN, b"another key of at least thirty-two bytes", MemorySignOuts(), clock=lambda: now[0]
    )
    assert other.principal(event) is None
    now[0] += 61
    assert auth.principal(event) is None
    assert same("a", "a") and not same("a", "b") and not same("a", "aa")


def test_signing_out_ends_the_session_on_the_server(world: World) -> None:
    mine, other = world.sign_in(), world.sign_in()
    page = world.get("/console/targets", cookie=mine)["body"]
    csrf = csrf_of(page)
    out = world.post("/console/signout", {"csrf": csrf}, cookie=mine)
    assert out["statusCode"] == 303 and out["headers"]["Location"] == "/console/signin"
    assert "Max-Age=0" in out["cookies"][0]  # the browser forgets it; a copy is refused by the server:
    for path in ("/console", "/console/targets", "/console/holds"):
        assert world.get(path, cookie=mine)["statusCode"] == 401, path
    form = {"target": TARGET, "image": IMAGE, "csrf": csrf}  # the session's own CSRF token, copied too
    assert world.post("/console/actions/hold", form, cookie=mine)["statusCode"] == 401
    assert world.post("/console/signout", {"csrf": csrf}, cookie=mine)["statusCode"] == 401
    assert world.state.targets.get(TARGET) is None  # nothing was done
    assert world.get("/console", cookie=other)["statusCode"] == 200  # another session is its own
    assert world.get("/console", cookie=world.sign_in())["statusCode"] == 200  # signing in again works
    (record,) = world.state_items("SESSION#")
    _, expiry, _ = mine.split(".")
    assert record["expires_at"] == {"N": expiry} and mine.split(".")[0] not in json.dumps(record)


def test_every_answer_carries_the_security_headers(world: World) -> None:
    cookie = world.sign_in()
    for response in (
        world.get("/console"),
        world.get("/console", cookie=cookie),
        world.get("/console/signin"),
    ):
        headers = response["headers"]
        assert headers["Content-Security-Policy"] == CSP
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        assert headers["Strict-Transport-Security"] == "max-age=31536000"
    page = world.get("/console", cookie=cookie)["body"]
    assert "<script>" not in page and " style=" not in page  # no inline script or style
    css = page.split('rel="stylesheet" href="')[1].split('"')[0]
    asset = world.get(css)
    assert asset["statusCode"] == 200 and asset["headers"]["Content-Type"].startswith("text/css")
    assert "immutable" in asset["headers"]["Cache-Control"]


# -- CSRF ------------------------------------------------------------------------------------------
def test_a_post_without_the_sessions_csrf_token_is_403(world: World) -> None:
    mine, theirs = world.sign_in(), world.sign_in()
    their_token = csrf_of(world.get("/console", cookie=theirs)["body"])
    my_token = csrf_of(world.get("/console", cookie=mine)["body"])
    assert their_token != my_token
    form = {"target": TARGET, "image": IMAGE}
    assert world.post("/console/actions/hold", form, cookie=mine)["statusCode"] == 403
    assert world.post("/console/actions/hold", form | {"csrf": their_token}, cookie=mine)["statusCode"] == 403
    assert world.post("/console/actions/hold", form | {"csrf": "é"}, cookie=mine)["statusCode"] == 403
    assert world.state.targets.get(TARGET) is None  # nothing was done
    done = world.post("/console/actions/hold", form | {"csrf": my_token}, cookie=mine)
    assert done["statusCode"] == 303
    held = world.state.targets.get(TARGET)
    assert held is not None and held.status is TargetStatus.HELD and held.detail == "held by local"


# -- what untrusted text does on a page -------------------------------------------------------------
def test_hostile_strings_are_rendered_as_text(world: World) -> None:
    now = int(time.time() * 1000)
    world.state.tags.record(IMAGE, D1, now, Trigger.POLL)
    world.state.tags.record_error(IMAGE, f"registry said {XSS}", now)
    world.state.targets.claim(TARGET, IMAGE, D1, now, Trigger.POLL, now)
    world.state.targets.finish(
        TARGET, D1, TargetStatus.FAILED, now, trigger=Trigger.POLL, detail=f"pod {XSS}"
    )
    world.sqs.send_message(
        QueueUrl=world.dlq_url, MessageBody=XSS, MessageGroupId="junk", MessageDeduplicationId="j"
    )
    cookie = world.sign_in()
    for path, query in (("/console", {}), ("/console/targets", {}), ("/console/dead-letters", {}),
                        ("/console/target", {"id": TARGET}), ("/console/image", {"ref": IMAGE})):  # fmt: skip
        body = world.get(path, cookie=cookie, query=query)["body"]
        assert "<script>alert" not in body and "<img src=x" not in body, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in body, path


# -- pages -----------------------------------------------------------------------------------------
def test_targets_are_paged_over_the_configuration_and_every_shard(world: World) -> None:
    entries = [
        IndexEntry(image=f"registry.example.com/team/app{i}:stable", target_id=f"lab/ns/Deployment/app{i}/c",
                   cluster="lab", namespace="ns", kind="Deployment", name=f"app{i}", container="c")
        for i in range(230)
    ]  # fmt: skip
    world.state.index.update(entries, [])
    cookie = world.sign_in()
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        body = world.get("/console/targets", cookie=cookie, query={"after": cursor} if cursor else {})["body"]
        rows = [part.split('"')[0] for part in body.split('<tr data-target="')[1:]]
        assert len(rows) <= 100
        seen.extend(rows)
        pages += 1
        if 'id="next"' not in body:
            break
        cursor = body.split('id="next" href="/console/targets?after=')[1].split('"')[0]
        from urllib.parse import unquote

        cursor = unquote(cursor.replace("&amp;", "&"))
    assert pages == 3
    assert sorted(seen) == sorted([TARGET, *(e.target_id for e in entries)])
    bad = world.get("/console/targets", cookie=cookie, query={"after": "i99:x"})
    assert bad["statusCode"] == 400


def test_hold_then_release_sends_the_tags_digest_again(world: World) -> None:
    now = int(time.time() * 1000)
    world.state.tags.record(IMAGE, D2, now, Trigger.POLL)
    cookie = world.sign_in()
    csrf = csrf_of(world.get("/console", cookie=cookie)["body"])
    form = {"target": TARGET, "image": IMAGE, "csrf": csrf}
    held = world.post("/console/actions/hold", form, cookie=cookie)
    assert held["statusCode"] == 303 and "notice=held" in held["headers"]["Location"]
    page = world.get("/console/holds", cookie=cookie)["body"]
    assert TARGET in page and "held by local" in page
    released = world.post("/console/actions/release", form, cookie=cookie)
    assert "notice=released" in released["headers"]["Location"]
    target = world.get("/console/target", cookie=cookie, query={"id": TARGET, "notice": "released"})["body"]
    assert "Released: the tag" in target and "released by local" in target
    assert TARGET not in world.get("/console/holds", cookie=cookie)["body"]
    (message,) = world.sqs.receive_message(QueueUrl=world.queue_url, MaxNumberOfMessages=10)["Messages"]
    assert json.loads(message["Body"])["move"]["digest"] == D2
    unknown = world.post("/console/actions/hold", form | {"target": "x/y/Deployment/z/c"}, cookie=cookie)
    assert unknown["statusCode"] == 400
    assert world.post("/console/actions/nothing", form, cookie=cookie)["statusCode"] == 404


def test_a_hold_for_a_day_ends_by_itself(world: World) -> None:
    cookie = world.sign_in()
    page = world.get("/console/targets", cookie=cookie)["body"]
    assert (
        '<option value="1d">for 1 day</option>' in page and '<option value="">until released</option>' in page
    )
    form = {"target": TARGET, "image": IMAGE, "csrf": csrf_of(page)}
    refused = world.post("/console/actions/hold", form | {"for": "99y"}, cookie=cookie)
    assert refused["statusCode"] == 400 and world.state.targets.get(TARGET) is None
    before = int(time.time() * 1000)
    held = world.post("/console/actions/hold", form | {"for": "1d"}, cookie=cookie)
    assert "notice=held" in held["headers"]["Location"]
    state = world.state.targets.get(TARGET)
    assert state is not None and state.held_until is not None
    assert before + 86_400_000 <= state.held_until <= int(time.time() * 1000) + 86_400_000
    assert "held by local until 20" in (state.detail or "")  # a date, not epoch milliseconds


def test_dead_letters_are_summarised_and_redriven(world: World) -> None:
    change = {"image": IMAGE, "digest": D1, "observed_at": 1, "changed_at": 1, "trigger": "poll"}
    world.sqs.send_message(QueueUrl=world.dlq_url, MessageBody=json.dumps(change), MessageGroupId=IMAGE,
                           MessageDeduplicationId="c1")  # fmt: skip
    failure = {"detail-type": "Lambda Function Invocation Result - Failure", "detail": {
        "requestContext": {"functionArn": "arn:aws:lambda:us-east-1:1:function:tagpin-poller:$LATEST",
                           "condition": "RetriesExhausted"},
        "responsePayload": {"errorType": "Boom", "errorMessage": "the registry was down"}}}  # fmt: skip
    world.sqs.send_message(QueueUrl=world.dlq_url, MessageBody=json.dumps(failure),
                           MessageGroupId="failed-invocations", MessageDeduplicationId="f1")  # fmt: skip
    cookie = world.sign_in()
    page = world.get("/console/dead-letters", cookie=cookie)["body"]
    assert IMAGE in page and "the registry was down" in page and "tagpin-poller" in page
    again = world.get("/console/dead-letters", cookie=cookie)["body"]  # a look changes nothing
    assert IMAGE in again and "the registry was down" in again
    csrf = csrf_of(page)
    done = world.post("/console/actions/redrive", {"csrf": csrf}, cookie=cookie)
    assert done["headers"]["Location"] == "/console/dead-letters?notice=redriven&n=2"
    (message,) = world.sqs.receive_message(QueueUrl=world.queue_url, MaxNumberOfMessages=10)["Messages"]
    assert json.loads(message["Body"])["digest"] == D1  # sent back as it was (a deployed stack's shape)
    assert "none" in world.get("/console/dead-letters", cookie=cookie)["body"]


# -- on AWS: the JWT authorizer's claims ----------------------------------------------------------
def test_jwt_claims_sign_in_and_name_who_did_it(jwt_world: World) -> None:
    claims = {"sub": "1234", "email": "ops@example.com"}
    assert jwt_world.get("/console")["statusCode"] == 401  # no claims: refused, whatever the route
    assert jwt_world.get("/console", claims=claims)["statusCode"] == 401  # no bearer token
    page = jwt_world.get("/console", claims=claims, bearer="token-a")
    assert page["statusCode"] == 200 and "ops@example.com" in page["body"]
    assert jwt_world.get("/console/signin", claims=claims, bearer="token-a")["statusCode"] == 404
    csrf = csrf_of(jwt_world.get("/console/targets", claims=claims, bearer="token-a")["body"])
    other = csrf_of(jwt_world.get("/console/targets", claims=claims, bearer="token-b")["body"])
    assert csrf != other
    form = {"target": TARGET, "image": IMAGE}
    refused = invoke(jwt_world.handler, request("POST", "/console/actions/hold", form=form | {"csrf": other},
                                                claims=claims, bearer="token-a"))  # fmt: skip
    assert refused["statusCode"] == 403
    done = invoke(jwt_world.handler, request("POST", "/console/actions/hold", form=form | {"csrf": csrf},
                                             claims=claims, bearer="token-a"))  # fmt: skip
    assert done["statusCode"] == 303
    held = jwt_world.state.targets.get(TARGET)
    assert held is not None and held.detail == "held by ops@example.com"


# -- approvals: the console's buttons and Slack's ---------------------------------------------------


def _awaiting(world: World, digest: str = D2) -> None:
    """The configuration asks for approval; the promotion of ``digest`` waits for it (wave 0)."""
    document = yaml.safe_load(
        boto3.client("ssm", region_name=REGION).get_parameter(Name=PARAMETER)["Parameter"]["Value"]
    )
    document["images"][0]["approval"] = True
    document["rollout"] = {"notifications": {"sns": False, "webhooks_secret": HOOKS}}
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name=PARAMETER, Value=yaml.safe_dump(document), Type="String", Overwrite=True
    )
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name="/" + HOOKS, Value=json.dumps({"slack_signing_secret": SLACK_SECRET}), Type="SecureString"
    )
    wiring.reset()
    now = int(time.time() * 1000)
    world.state.tags.record(IMAGE, digest, now, Trigger.POLL)
    started = start_promotion(world.state, IMAGE, digest, now)
    assert started is not None
    assert world.state.promotions.request_approval(IMAGE, digest, 0, now, now + 3_600_000)


def test_a_pending_approval_is_listed_and_approved_once(world: World) -> None:
    _awaiting(world)
    cookie = world.sign_in()
    page = world.get("/console", cookie=cookie)["body"]
    assert f'data-approval="{IMAGE}"' in page and D2[:19] in page
    form = {"image": IMAGE, "digest": D2, "csrf": csrf_of(page)}
    approved = world.post("/console/actions/approve", form, cookie=cookie)
    assert approved["statusCode"] == 303 and "notice=approved" in approved["headers"]["Location"]
    again = world.post("/console/actions/approve", form, cookie=cookie)  # a double click
    assert "notice=nothing-waiting" in again["headers"]["Location"]
    (message,) = world.sqs.receive_message(QueueUrl=world.queue_url, MaxNumberOfMessages=10)["Messages"]
    assert json.loads(message["Body"])["move"]["digest"] == D2  # the wave's change, sent once
    history = world.state.history.of_image(IMAGE)
    assert [e.detail for e in history if e.event == "approved"] == ["wave all: approved by local via console"]
    assert 'data-approval="' not in world.get("/console", cookie=cookie)["body"]


def test_an_approval_waiting_for_a_label_discovered_image_is_listed(world: World) -> None:
    _awaiting(world)
    discovered = "registry.example.com/team/found:stable"  # not in the configuration
    now = int(time.time() * 1000)
    start_promotion(world.state, discovered, D1, now)
    assert world.state.promotions.request_approval(discovered, D1, 0, now, now + 3_600_000)
    page = world.get("/console", cookie=world.sign_in())["body"]
    assert f'data-approval="{IMAGE}"' in page and f'data-approval="{discovered}"' in page


def test_rejecting_an_older_digest_does_nothing_and_says_so(world: World) -> None:
    _awaiting(world)
    cookie = world.sign_in()
    csrf = csrf_of(world.get("/console", cookie=cookie)["body"])
    stale = world.post("/console/actions/reject", {"image": IMAGE, "digest": D1, "csrf": csrf}, cookie=cookie)
    assert "notice=stale" in stale["headers"]["Location"]
    assert world.state.promotions.get(IMAGE).awaiting_approval  # type: ignore[union-attr]
    page = world.get("/console", cookie=cookie, query={"notice": "stale"})["body"]
    assert "a newer digest supersedes" in page


def _slack_click(
    action: str, digest: str, response_url: str, secret: str = SLACK_SECRET, at: int | None = None
) -> dict[str, Any]:
    value = json.dumps({"image": IMAGE, "digest": digest, "wave": "all"})
    payload = {
        "type": "block_actions",
        "user": {"id": "U1", "username": "ana"},
        "actions": [{"action_id": action, "value": value}],
        "response_url": response_url,
    }
    return slack_request(urlencode({"payload": json.dumps(payload)}).encode(), secret, at)


def test_slack_clicks_are_verified_then_decided(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    replies: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(wiring, "slack_reply", lambda url, message: replies.append((url, message)))
    hook = "https://hooks.slack.com/actions/T1/1/x"
    assert invoke(world.handler, _slack_click("approve", D2, hook))["statusCode"] == 401  # not configured
    _awaiting(world)
    world.handler = load_handler("console")
    forged = invoke(world.handler, _slack_click("reject", D2, hook, secret="another secret"))
    replayed = invoke(world.handler, _slack_click("reject", D2, hook, at=int(time.time()) - 600))
    assert forged["statusCode"] == 401 and replayed["statusCode"] == 401
    assert world.state.promotions.get(IMAGE).awaiting_approval  # type: ignore[union-attr]
    elsewhere = invoke(world.handler, _slack_click("reject", D2, "https://attacker.example/x"))
    assert elsewhere["statusCode"] == 200 and "Rejected" in json.loads(elsewhere["body"])["text"]
    assert replies == []  # a response_url that is not Slack's is never requested
    assert invoke(world.handler, _slack_click("approve", D2, hook))["statusCode"] == 200
    ((url, message),) = replies
    assert url == hook and message["replace_original"] and "Nothing waits" in message["text"]
    history = world.state.history.of_image(IMAGE)
    assert [e.detail for e in history if e.event == "rejected"] == ["wave all: rejected by ana via slack"]
    assert world.state.tags.get(IMAGE).bad_digest == D2  # type: ignore[union-attr]


def test_an_images_page_shows_its_promotion_wave_by_wave(world: World) -> None:
    _awaiting(world)
    cookie = world.sign_in()
    page = world.get("/console/image", cookie=cookie, query={"ref": IMAGE})["body"]
    assert 'id="waves"' in page and 'data-wave="all"' in page
    assert '<span class="badge awaiting-approval">awaiting-approval</span>' in page
    now = int(time.time() * 1000)
    world.state.promotions.decide_approval(IMAGE, D2, 0, True, now, "approved by t via test")
    assert world.state.promotions.wave_verified(IMAGE, D2, 0, now)
    page = world.get("/console/image", cookie=cookie, query={"ref": IMAGE})["body"]
    assert (
        '<span class="badge soaking">soaking</span>' in page and "<time" in page.split('data-wave="all"')[1]
    )


def test_a_targets_page_says_whether_its_digest_would_start_now_and_why_not(world: World) -> None:
    """Every gate of admission, in order, for the tag's digest: the console's "would it start?" is
    the consumer's and ``tagpin plan``'s (``Admission.explain``); the gates that read a registry or
    the workload are not asked there, and say so."""
    cookie = world.sign_in()
    assert (
        "Would " not in world.get("/console/target", cookie=cookie, query={"id": TARGET})["body"]
    )  # no digest yet
    world.state.tags.record(IMAGE, D2, int(time.time() * 1000), Trigger.POLL)
    page = world.get("/console/target", cookie=cookie, query={"id": TARGET})["body"]
    gates = re.findall(r'<tr data-gate="([a-z-]+)" data-verdict="([a-z-]+)">', page)
    assert gates == [
        ("superseded", "go"),
        ("bad-digest", "go"),
        ("wave", "go"),
        ("approval", "go"),
        ("hold", "go"),
        ("platform", "unknown"),
        ("signature", "unknown"),
        ("window", "go"),
        ("slot", "go"),
        ("paused", "unknown"),
        ("hold", "unknown"),
        ("owner", "unknown"),
    ]
    assert (
        "no gate the console can ask stops it (not asked here: hold, owner, paused, platform, signature)"
        in page
    )
    csrf = csrf_of(page)
    world.post("/console/actions/hold", {"target": TARGET, "image": IMAGE, "csrf": csrf}, cookie=cookie)
    page = world.get("/console/target", cookie=cookie, query={"id": TARGET})["body"]
    assert '<tr data-gate="hold" data-verdict="block">' in page
    assert '<p id="admission-answer">would not start now: held: held by local' in page
