"""Authentication per source: HMAC signatures, JFrog's two forms, URL tokens, static headers,
Pub/Sub OIDC tokens (signature, audience, issuer, expiry, service account), secret validation."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from tagpin.adapters.webhooks.auth import (
    HmacSignature,
    JFrogEventAuth,
    PubSubOidc,
    SourceSecret,
    StaticHeader,
    UrlToken,
    load_secret,
)
from tagpin.ports.state import State
from tagpin.ports.webhooks import Request, WebhookError

from tests.support.constants import STATE_TABLE
from tests.support.webhooks import Hook, http_parts, sample

AUDIENCE = "https://hooks.example.com/webhooks/gar"
EMAIL = "tagpin-push@proj.iam.gserviceaccount.com"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(private: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    key: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    return {**key, "kid": kid, "alg": "RS256", "use": "sig"}


OIDC = SourceSecret(audience=AUDIENCE, email=EMAIL, jwks={"keys": [jwk(KEY, "k1")]})


def token(
    *,
    key: rsa.RSAPrivateKey = KEY,
    kid: str = "k1",
    algorithm: str = "RS256",
    drop: tuple[str, ...] = (),
    **claims: Any,
) -> str:
    now = int(time.time())
    payload = {
        "iss": "https://accounts.google.com",
        "aud": AUDIENCE,
        "email": EMAIL,
        "email_verified": True,
        "iat": now,
        "exp": now + 3600,
        "sub": "1234",
        **claims,
    }
    for name in drop:
        payload.pop(name)
    return jwt.encode(payload, key, algorithm=algorithm, headers={"kid": kid})


def req(
    headers: dict[str, str] | None = None, query: dict[str, str] | None = None, body: bytes = b"{}"
) -> Request:
    return Request(headers or {}, query or {}, body)


def test_oidc_token_is_accepted() -> None:
    PubSubOidc().verify(req({"authorization": f"Bearer {token()}"}), OIDC)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda: token(aud="https://elsewhere.example.com"), id="audience"),
        pytest.param(lambda: token(iss="https://evil.example.com"), id="issuer"),
        pytest.param(lambda: token(exp=int(time.time()) - 3600), id="expired"),
        pytest.param(lambda: token(email="someone@proj.iam.gserviceaccount.com"), id="email"),
        pytest.param(lambda: token(email_verified=False), id="email-unverified"),
        pytest.param(lambda: token(drop=("email",)), id="no-email"),
        pytest.param(lambda: token(drop=("exp",)), id="no-exp"),
        pytest.param(lambda: token(key=OTHER_KEY), id="wrong-key-same-kid"),
        pytest.param(lambda: token(kid="unknown"), id="unknown-kid"),
        pytest.param(
            lambda: jwt.encode(
                {"aud": AUDIENCE, "email": EMAIL}, "s" * 32, algorithm="HS256", headers={"kid": "k1"}
            ),
            id="hs256",
        ),
        pytest.param(lambda: token().rsplit(".", 1)[0] + ".", id="no-signature"),
        pytest.param(lambda: "not.a.jwt", id="garbage"),
        pytest.param(lambda: "", id="empty"),
    ],
)
def test_bad_oidc_token_is_401(bad: Any) -> None:
    with pytest.raises(WebhookError) as caught:
        PubSubOidc().verify(req({"authorization": f"Bearer {bad()}"}), OIDC)
    assert caught.value.status == 401


def test_oidc_needs_a_bearer_header() -> None:
    for headers in ({}, {"authorization": token()}, {"authorization": f"Basic {token()}"}):
        with pytest.raises(WebhookError):
            PubSubOidc().verify(req(headers), OIDC)


def test_unusable_jwks_is_401_not_5xx() -> None:
    broken = SourceSecret(audience=AUDIENCE, email=EMAIL, jwks={"keys": [{"kty": "RSA", "n": "x"}]})
    with pytest.raises(WebhookError) as caught:
        PubSubOidc().verify(req({"authorization": f"Bearer {token()}"}), broken)
    assert caught.value.status == 401


def test_gar_accepts_an_oidc_token_or_the_url_token(store: State, dynamodb: Any) -> None:
    _, event, _ = sample("gar-pubsub")
    source, headers, body, _ = http_parts(event)
    hook = Hook(store, dynamodb, STATE_TABLE)
    hook.secrets = {"gar": {"audience": AUDIENCE, "email": EMAIL, "jwks": {"keys": [jwk(KEY, "k1")]}}}
    assert hook.post(source, {**headers, "authorization": f"Bearer {token()}"}, body).status == 202
    assert (
        hook.post(source, {**headers, "authorization": f"Bearer {token(key=OTHER_KEY)}"}, body).status == 401
    )
    assert (
        hook.post(source, headers, body, {"token": "local-dev-webhook-token"}).status == 401
    )  # not configured
    hook.secrets["gar"]["token"] = "local-dev-webhook-token"
    assert hook.post(source, headers, body, {"token": "local-dev-webhook-token"}).status == 202
    assert hook.post(source, headers, body, {"token": "wrong"}).status == 401


def test_github_signature() -> None:
    scheme = HmacSignature("x-hub-signature-256", hashlib.sha256, prefix="sha256=")
    secret = SourceSecret.model_validate({"hmac": "k"})
    body = b'{"action":"published"}'
    good = "sha256=" + hmac.new(b"k", body, hashlib.sha256).hexdigest()
    scheme.verify(req({"x-hub-signature-256": good}, body=body), secret)
    scheme.verify(req({"x-hub-signature-256": good.upper().replace("SHA256=", "sha256=")}, body=body), secret)
    for given in (
        "",
        good[7:],
        "sha1=" + good[7:],
        good + "0",
        good.replace("sha256=", "sha256= "),
        "sha256=é",
    ):
        with pytest.raises(WebhookError):
            scheme.verify(req({"x-hub-signature-256": given}, body=body), secret)
    with pytest.raises(WebhookError):
        scheme.verify(req({"x-hub-signature-256": good}, body=body + b" "), secret)


def test_nexus_signature_is_sha1_hex() -> None:
    scheme = HmacSignature("x-nexus-webhook-signature", hashlib.sha1)
    secret = SourceSecret.model_validate({"hmac": "k"})
    body = b"{}"
    scheme.verify(
        req({"x-nexus-webhook-signature": hmac.new(b"k", body, hashlib.sha1).hexdigest()}, body=body), secret
    )
    with pytest.raises(WebhookError):
        scheme.verify(
            req({"x-nexus-webhook-signature": hmac.new(b"k", body, hashlib.sha256).hexdigest()}, body=body),
            secret,
        )


def test_jfrog_accepts_the_secret_or_its_hmac() -> None:
    scheme, secret, body = JFrogEventAuth(), SourceSecret.model_validate({"token": "k"}), b"{}"
    scheme.verify(req({"x-jfrog-event-auth": "k"}, body=body), secret)
    scheme.verify(
        req({"x-jfrog-event-auth": hmac.new(b"k", body, hashlib.sha256).hexdigest()}, body=body), secret
    )
    for given in ("", "K", "Bearer k", hmac.new(b"k", b"[]", hashlib.sha256).hexdigest()):
        with pytest.raises(WebhookError):
            scheme.verify(req({"x-jfrog-event-auth": given}, body=body), secret)


def test_url_token_and_static_header() -> None:
    secret = SourceSecret.model_validate({"token": "t0k"})
    UrlToken().verify(req(query={"token": "t0k"}), secret)
    StaticHeader().verify(req({"authorization": "Bearer t0k"}), secret)
    StaticHeader().verify(req({"authorization": "t0k"}), secret)
    custom = SourceSecret.model_validate({"token": "t0k", "header": "X-Tagpin-Token"})
    StaticHeader().verify(req({"x-tagpin-token": "t0k"}), custom)
    for scheme, request in (
        (UrlToken(), req(query={"token": "t0"})),
        (UrlToken(), req(query={"Token": "t0k"})),
        (UrlToken(), req({"authorization": "Bearer t0k"})),
        (StaticHeader(), req({"authorization": "bearer t0k"})),
        (StaticHeader(), req(query={"token": "t0k"})),
    ):
        with pytest.raises(WebhookError):
            scheme.verify(request, secret)
    with pytest.raises(WebhookError):
        StaticHeader().verify(req({"authorization": "Bearer t0k"}), custom)  # the configured header only


def test_secret_entries() -> None:
    assert load_secret(None, StaticHeader(), "s") is None
    assert load_secret("", StaticHeader(), "s") is None
    assert load_secret({"hmac": "x"}, StaticHeader(), "s") is None  # not what this scheme needs
    shorthand = load_secret("abc", HmacSignature("h", hashlib.sha256), "github")
    assert shorthand is not None and shorthand.hmac is not None and shorthand.hmac.get_secret_value() == "abc"
    for bad in ({"tokn": "abc"}, ["abc"], 42, {"token": 42}):
        with pytest.raises(WebhookError) as caught:
            load_secret(bad, StaticHeader(), "harbor")
        assert caught.value.status == 401
        assert "abc" not in caught.value.message  # names the field, never the value


def test_secret_values_are_not_shown(store: State, dynamodb: Any, caplog: pytest.LogCaptureFixture) -> None:
    hook = Hook(
        store, dynamodb, STATE_TABLE, secrets={"harbor": {"token": "s3cr3t-value", "typo": "s3cr3t-value"}}
    )
    _, event, _ = sample("harbor-default")
    result = hook.send(event)
    assert result.status == 401 and "typo" in result.body["error"]
    assert "s3cr3t-value" not in json.dumps(result.body) and "s3cr3t-value" not in caplog.text
    assert repr(SourceSecret(token="s3cr3t-value")).count("s3cr3t-value") == 0  # type: ignore[arg-type]
