"""Recording every AWS call each function makes (``Recorder``), for the IAM proof
(tests/support/iam.py, tests/support/iamroles.py).

A wrapper around botocore's ``BaseClient._make_api_call`` sees every call of every client
(tagpin's, powertools' parameters and idempotency, botocore's assume-role credential fetcher) with
its operation, parameters, region and credentials. A call is attributed to the function whose
invocation made it through ``tagpin_local.lambda_runtime.INVOKED`` (a context variable set by the
handlers ``load_handler`` returns); thread pools started during an invocation get the submitter's
context (``ThreadPoolExecutor.submit`` is wrapped while recording), and the registry client's
event loop gets it from ``run_coroutine_threadsafe``. Calls outside any invocation (test setup, use
cases driven directly) are not a function's. Registry API reads of an ECR registry (``HEAD``/``GET``
``/v2/<name>/manifests/<ref>`` with an ECR token) are recorded as the ECR actions AWS authorises.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from tagpin_local.lambda_runtime import INVOKED

from tests.support.constants import ROOT
from tests.support.iam import ACCOUNT, Call, Request, Underivable, make_arn, requests_of, role_account

ENVIRONMENT = (
    "TAGPIN_CONFIG_PARAMETER", "TAGPIN_STATE_TABLE", "TAGPIN_IDEMPOTENCY_TABLE", "TAGPIN_QUEUE_URL",
    "TAGPIN_VERIFICATION_QUEUE_URL", "TAGPIN_NOTIFY_TOPIC_ARN", "TAGPIN_WEBHOOK_SECRET",
    "TAGPIN_SECRET_STORE", "TAGPIN_DEAD_LETTER_QUEUE_URL", "TAGPIN_WRITEBACK_QUEUE_URL",
    "TAGPIN_NOTIFICATIONS_QUEUE_URL",
)  # fmt: skip
_PRODUCTION = (str(ROOT / "layers" / "common" / "tagpin"), str(ROOT / "functions"))
_MANIFESTS = re.compile(r"^/v2/(?P<name>.+)/manifests/[^/]+$")
_TAG_LIST = re.compile(r"^/v2/(?P<name>.+)/tags/list$")
_BLOBS = re.compile(r"^/v2/(?P<name>.+)/blobs/[^/]+$")
_REFERRERS = re.compile(r"^/v2/(?P<name>.+)/referrers/[^/]+$")


@dataclass
class _Sink:
    calls: list[Call] = field(default_factory=list)
    unattributed: list[str] = field(default_factory=list)  # production calls made outside an invocation


class Recorder:
    """Records every AWS call each function makes (see the module docstring). ``on_call`` is
    called with each attributed call, after it is recorded."""

    def __init__(self, on_call: Callable[[Call], None] | None = None) -> None:
        self.on_call = on_call
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._assumed: dict[str, str] = {}  # access key id -> the role it was issued for
        self._keys: dict[str, str] = {}  # SecureString or secret name -> its customer KMS key
        self._ecr: dict[str, Any] = {}  # registry API host -> its EcrKey (region, account, role)
        self._capture: _Sink | None = None
        self._undo: list[Callable[[], None]] = []

    # -- installing
    def install(self) -> None:
        import botocore.client
        from tagpin.adapters.registry.client import RegistryClient
        from tagpin.adapters.registry.credentials import CredentialStore

        recorder = self
        make_api_call = botocore.client.BaseClient._make_api_call

        def recorded(client: Any, operation: str, params: dict[str, Any]) -> Any:
            # AWS authorises a call before it answers, so a call that fails (a missing item's
            # ConditionalCheckFailed, a parameter not found, a throttle) is one its role must allow
            # too: recorded either way (an error path's calls are checked, not only the happy path's)
            function = INVOKED.get()
            try:
                response = make_api_call(client, operation, params)
            except Exception:
                recorder._observe(client, operation, params, None, function)
                raise
            recorder._observe(client, operation, params, response, function)
            return response

        submit = ThreadPoolExecutor.submit

        def submit_in_context(pool: ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            if INVOKED.get() is None:
                return submit(pool, fn, *args, **kwargs)
            return submit(pool, contextvars.copy_context().run, fn, *args, **kwargs)

        ecr_key = CredentialStore._ecr_key

        def remembered_ecr_key(host: str, settings: Any) -> Any:
            key = ecr_key(host, settings)
            recorder._ecr[host] = key
            return key

        send = RegistryClient._send

        async def sent(client: Any, method: str, url: str, host: str, *args: Any, **kwargs: Any) -> Any:
            recorder._registry_request(method, url, host)
            return await send(client, method, url, host, *args, **kwargs)

        patches: list[tuple[Any, str, Any]] = [
            (botocore.client.BaseClient, "_make_api_call", recorded),
            (ThreadPoolExecutor, "submit", submit_in_context),
            (CredentialStore, "_ecr_key", staticmethod(remembered_ecr_key)),
            (RegistryClient, "_send", sent),
        ]
        for owner, name, replacement in patches:
            original = owner.__dict__[name]
            setattr(owner, name, replacement)
            self._undo.append(functools.partial(setattr, owner, name, original))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    @contextlib.contextmanager
    def capture(self) -> Iterator[_Sink]:
        """Route the calls made meanwhile to the sink yielded (not to ``calls``, nor ``on_call``), and
        note production calls made outside any invocation on a thread other than the main one (a
        thread the invocation's context did not reach)."""
        sink = _Sink()
        with self._lock:
            assert self._capture is None, "captures do not nest"
            self._capture = sink
        try:
            yield sink
        finally:
            with self._lock:
                self._capture = None

    # -- observing
    def _observe(
        self, client: Any, operation: str, params: dict[str, Any], response: Any | None, function: str | None
    ) -> None:
        service = client.meta.service_model.service_name
        if response is not None:  # None: the call failed, and taught nothing
            self._learn(service, operation, params, response)
        if function is None:
            # test code reads the state through the production repositories, on the main thread
            worker = threading.current_thread() is not threading.main_thread()
            if self._capture is not None and worker and _from_production():
                self._capture.unattributed.append(
                    f"{service}:{operation} on thread {threading.current_thread().name}"
                )
            return
        principal = self._assumed.get(_access_key(client) or "")
        account = role_account(principal) if principal else ACCOUNT
        # A call that failed read nothing, so KMS was never asked to decrypt it: its customer key is
        # not part of what it needs (a secret of the same name another test created with a key, and
        # this test reads while it does not exist, is only a Secrets Manager request). A read that
        # succeeds is checked with its key.
        keys = self._keys if response is not None else {}
        try:
            requests = tuple(requests_of(service, operation, params, client.meta.region_name, account, keys))
            error = None
        except (Underivable, KeyError, ValueError) as exc:
            if response is None:  # a failed call naming no resource (a warm-up's empty Publish)
                return
            requests, error = (), f"{type(exc).__name__}: {exc}"
        self._add(Call(function, f"{service}:{operation}", requests, principal, environment(), error))

    def _learn(self, service: str, operation: str, params: Mapping[str, Any], response: Any) -> None:
        if service == "sts" and operation == "AssumeRole":
            self._assumed[response["Credentials"]["AccessKeyId"]] = params["RoleArn"]
        # A name written again without a customer key (another test's stack, say) forgets its key.
        elif service == "ssm" and operation == "PutParameter":
            if params.get("Type") == "SecureString" and params.get("KeyId"):
                self._keys[params["Name"]] = params["KeyId"]
            else:
                self._keys.pop(params["Name"], None)
        elif service == "ssm" and operation == "DeleteParameter":
            self._keys.pop(params["Name"], None)
        elif service == "secretsmanager" and operation in ("CreateSecret", "UpdateSecret"):
            name = params.get("Name") or params.get("SecretId")
            if params.get("KmsKeyId") and name:
                self._keys[name] = params["KmsKeyId"]
            elif operation == "CreateSecret" and name:
                self._keys.pop(name, None)
        elif service == "secretsmanager" and operation == "DeleteSecret":
            self._keys.pop(params.get("SecretId", ""), None)

    def _registry_request(self, method: str, url: str, host: str) -> None:
        function, key = INVOKED.get(), self._ecr.get(host)
        path = urlparse(url).path
        # ECR authorises its registry API as ECR actions, for the principal the token was issued to
        # (the assumed role's account when ``ecr.role_arn`` is set): a manifest read (and the
        # referrers API) as ecr:BatchGetImage, a blob (a config, a signature's layer) as
        # ecr:GetDownloadUrlForLayer, a tag list (version channels) as ecr:ListImages.
        kinds = (
            (_MANIFESTS, "ecr:BatchGetImage", "manifests"),
            (_REFERRERS, "ecr:BatchGetImage", "referrers"),
            (_BLOBS, "ecr:GetDownloadUrlForLayer", "blobs"),
            (_TAG_LIST, "ecr:ListImages", "tags/list"),
        )
        found = next(((m, a, w) for pattern, a, w in kinds if (m := pattern.match(path))), None)
        if function is None or key is None or found is None or method not in ("GET", "HEAD"):
            return
        match, action, what = found
        account = key.account or (role_account(key.role_arn) if key.role_arn else ACCOUNT)
        resource = make_arn("ecr", key.region, account, f"repository/{match['name']}")
        self._add(
            Call(
                function,
                f"registry:{method} {what}",
                (Request(action, resource),),
                key.role_arn,
                environment(),
            )
        )

    def _add(self, call: Call) -> None:
        with self._lock:
            sink = self._capture
            (sink.calls if sink is not None else self.calls).append(call)
        if sink is None and self.on_call is not None:
            self.on_call(call)


def _access_key(client: Any) -> str | None:
    credentials = getattr(getattr(client, "_request_signer", None), "_credentials", None)
    key = getattr(credentials, "access_key", None)
    return str(key) if key else None


def environment() -> tuple[tuple[str, str], ...]:
    import os

    return tuple((name, os.environ[name]) for name in ENVIRONMENT if name in os.environ)


def _from_production() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(_PRODUCTION):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False
