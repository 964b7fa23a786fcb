"""IAM proven from what the code calls: every AWS request a function makes, evaluated against that
function's own role as template.yaml defines it.

- Recording (``Recorder``): a wrapper around botocore's ``BaseClient._make_api_call`` sees every
  call of every client (tagpin's, powertools' parameters and idempotency, botocore's assume-role
  credential fetcher) with its operation, parameters, region and credentials. A call is attributed
  to the function whose invocation made it through ``tagpin_local.lambda_runtime.INVOKED`` (a
  context variable set by the handlers ``load_handler`` returns); thread pools started during an
  invocation get the submitter's context (``ThreadPoolExecutor.submit`` is wrapped while
  recording), and the registry client's event loop gets it from ``run_coroutine_threadsafe``. Calls
  outside any invocation (test setup, use cases driven directly) are not a function's.
- Requests (``requests_of``): each call becomes the IAM requests AWS authorises it as: an action and
  a resource ARN per request (``BatchGetItem`` on two tables is two requests, ``TransactWriteItems``
  one per item and kind, ``SendMessageBatch`` is ``sqs:SendMessage``; a secret's ARN carries the
  6-character suffix Secrets Manager appends; a SecureString or a secret created with a customer
  key adds ``kms:Decrypt`` on that key). Registry API reads of an ECR registry (``HEAD``/``GET``
  ``/v2/<name>/manifests/<ref>`` with an ECR token) are ``ecr:BatchGetImage`` on the repository
  (referrers too; blobs ``ecr:GetDownloadUrlForLayer``; tag lists ``ecr:ListImages``).
  A call made with an assumed role's credentials is that role's, not the function's: it is
  recorded and not evaluated (the role lives in another account).
- Roles (``Role``): the function's Policies with the stack's parameters decided, intrinsic
  functions evaluated to ARNs of the resources the function's environment names (as CloudFormation
  wires them: ``TAGPIN_STATE_TABLE`` is ``!Ref StateTable`` ...), SAM policy templates expanded,
  plus what SAM adds to every such role: ``AWSLambdaBasicExecutionRole``, the X-Ray policy with
  ``Tracing: Active``, ``AWSLambdaSQSQueueExecutionRole`` per SQS event source, ``sqs:SendMessage``
  on an ``EventInvokeConfig`` SQS destination.
- Evaluation: moto's policy engine (``moto.iam.access_control.IAMPolicyStatement``: Allow/Deny,
  NotAction, Principal, Conditions), with IAM's wildcard matching restored: moto 5.2.5 turns a
  pattern into a regular expression unescaped, so ``.`` matches any character and ``?`` (one
  character, as in ``secret:name-??????``) is a regex error; and it compares actions
  case-sensitively. ``Statement`` fixes those two and refuses NotResource (which moto ignores).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urlparse

from moto.iam.access_control import IAMPolicyStatement, PermissionResult
from tagpin_local.lambda_runtime import INVOKED

from tests.support.constants import ROOT

ACCOUNT = "123456789012"  # moto's default account, and the local stack's
REGION = "us-east-1"
PARTITION = "aws"
SECRET_SUFFIX = "AbC123"  # Secrets Manager appends "-" and 6 random characters to a secret's ARN


# --------------------------------------------------------------------------- the evaluator
@cache
def _glob(pattern: str, *, fold: bool) -> re.Pattern[str]:
    """IAM's wildcards: ``*`` any run of characters, ``?`` one character, everything else literal."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"^{body}$", re.IGNORECASE | re.DOTALL if fold else re.DOTALL)


class Statement(IAMPolicyStatement):
    """moto's statement evaluation with IAM's matching: wildcards as IAM defines them, actions
    case-insensitive, resources case-sensitive; NotResource refused (moto does not evaluate it)."""

    def __init__(self, statement: Mapping[str, Any]) -> None:
        if "NotResource" in statement:
            raise ValueError(f"NotResource is not evaluated here: {statement}")
        super().__init__(dict(statement))

    def _check_element_matches(self, statement_element: Any, value: str) -> bool:
        patterns = self._statement[statement_element]
        fold = statement_element in ("Action", "NotAction")
        return any(_glob(str(p), fold=fold).match(value) for p in as_list(patterns))

    def permits(self, action: str, resource: str) -> PermissionResult:
        return self.is_action_permitted(action, resource)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --------------------------------------------------------------------------- calls
@dataclass(frozen=True)
class Request:
    """One IAM authorisation: an action on a resource ARN ("*" for actions without a resource)."""

    action: str
    resource: str


@dataclass(frozen=True)
class Call:
    function: str  # the invoked function (tagpin.settings name: poller, webhook, ...)
    operation: str  # service:Operation as called (or what a platform/registry request is)
    requests: tuple[Request, ...]
    principal: str | None = None  # an assumed role's ARN; None: the function's own role
    environment: tuple[tuple[str, str], ...] = ()  # the TAGPIN_* variables when it was made
    error: str | None = None  # the call could not be turned into requests


class Underivable(Exception):
    """No rule turns this call into IAM requests: add one to ``requests_of``."""


def _arn(service: str, region: str, account: str, resource: str) -> str:
    return f"arn:{PARTITION}:{service}:{region}:{account}:{resource}"


def queue_arn(url: str, region: str) -> str:
    """The ARN of a queue URL (``https://sqs.<region>.amazonaws.com/<account>/<name>``, or moto's)."""
    if url.startswith("arn:"):
        return url
    account, name = urlparse(url).path.strip("/").split("/")[-2:]
    return _arn("sqs", region, account, name)


def table_arn(name: str, region: str, account: str = ACCOUNT) -> str:
    return name if name.startswith("arn:") else _arn("dynamodb", region, account, f"table/{name}")


def parameter_arn(name: str, region: str, account: str = ACCOUNT) -> str:
    if name.startswith("arn:"):
        return name
    return _arn("ssm", region, account, "parameter" + (name if name.startswith("/") else "/" + name))


def secret_arn(secret_id: str, region: str, account: str = ACCOUNT) -> str:
    """A secret's ARN as IAM sees it: the name, "-" and Secrets Manager's 6 random characters."""
    if secret_id.startswith("arn:"):
        return secret_id
    return _arn("secretsmanager", region, account, f"secret:{secret_id}-{SECRET_SUFFIX}")


def key_arn(key: str, region: str, account: str = ACCOUNT) -> str:
    if key.startswith("arn:"):
        return key
    return _arn("kms", region, account, key if key.startswith("alias/") else f"key/{key}")


def role_account(role_arn: str) -> str:
    return role_arn.split(":")[4]


_DYNAMODB_ONE_TABLE = {
    "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "DescribeTable",
    "ConditionCheckItem", "DescribeTimeToLive",
}  # fmt: skip
_TRANSACT = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
# SQS authorises the batch operations as their single forms.
_SQS = {
    "SendMessage": "SendMessage", "SendMessageBatch": "SendMessage", "ReceiveMessage": "ReceiveMessage",
    "DeleteMessage": "DeleteMessage", "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibility": "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility", "GetQueueAttributes": "GetQueueAttributes",
}  # fmt: skip


def requests_of(
    service: str,
    operation: str,
    params: Mapping[str, Any],
    region: str,
    account: str = ACCOUNT,
    keys: Mapping[str, str] | None = None,
) -> list[Request]:
    """The IAM requests one API call is authorised as. ``account``: the caller's; ``keys``: the
    customer KMS key of each SecureString parameter and secret (by name) that has one."""
    keys = keys or {}

    def one(action: str, resource: str) -> list[Request]:
        return [Request(f"{service}:{action}", resource)]

    if service == "dynamodb":
        if operation in _DYNAMODB_ONE_TABLE:
            arn = table_arn(params["TableName"], region, account)
            if params.get("IndexName"):
                arn += f"/index/{params['IndexName']}"
            return one(operation, arn)
        if operation in ("BatchGetItem", "BatchWriteItem"):
            return [
                Request(f"dynamodb:{operation}", table_arn(t, region, account))
                for t in params["RequestItems"]
            ]
        if operation in ("TransactWriteItems", "TransactGetItems"):
            out = []
            for item in params["TransactItems"]:
                ((kind, body),) = item.items()
                action = "GetItem" if kind == "Get" else _TRANSACT[kind]
                out.append(Request(f"dynamodb:{action}", table_arn(body["TableName"], region, account)))
            return out
    if service == "sqs":
        if operation in _SQS:
            return one(_SQS[operation], queue_arn(params["QueueUrl"], region))
        if operation == "GetQueueUrl":
            return one(
                "GetQueueUrl",
                _arn("sqs", region, params.get("QueueOwnerAWSAccountId", account), params["QueueName"]),
            )
    if service == "ssm" and operation in ("GetParameter", "GetParameters"):
        names = [params["Name"]] if operation == "GetParameter" else params["Names"]
        out = [Request(f"ssm:{operation}", parameter_arn(n, region, account)) for n in names]
        if params.get("WithDecryption"):
            out += [Request("kms:Decrypt", key_arn(keys[n], region, account)) for n in names if n in keys]
        return out
    if service == "secretsmanager" and operation in ("GetSecretValue", "DescribeSecret"):
        secret = params["SecretId"]
        out = one(operation, secret_arn(secret, region, account))
        if operation == "GetSecretValue" and secret in keys:
            out.append(Request("kms:Decrypt", key_arn(keys[secret], region, account)))
        return out
    if service == "sns" and operation == "Publish":
        return one("Publish", params.get("TopicArn") or params["TargetArn"])
    if service == "sts":
        if operation == "AssumeRole":
            return one("AssumeRole", params["RoleArn"])
        if operation == "GetCallerIdentity":
            return []  # needs no permission
    if service == "eks" and operation == "DescribeCluster":
        return one("DescribeCluster", _arn("eks", region, account, f"cluster/{params['name']}"))
    if service == "ecr":
        if operation == "GetAuthorizationToken":
            return one("GetAuthorizationToken", "*")
        if operation in ("BatchGetImage", "DescribeImages", "GetDownloadUrlForLayer"):
            registry = params.get("registryId") or account
            return one(operation, _arn("ecr", region, registry, f"repository/{params['repositoryName']}"))
    if service == "kms" and operation in ("Decrypt", "GetPublicKey"):
        return one(operation, key_arn(params["KeyId"], region, account))
    if service == "lambda" and operation == "Invoke":  # a split poll's parts: the poller itself
        name = str(params["FunctionName"])
        arn = name if name.startswith("arn:") else _arn("lambda", region, account, f"function:{name}")
        return [Request("lambda:InvokeFunction", arn)]
    raise Underivable(f"no IAM requests known for {service}:{operation}: add a rule to tests/support/iam.py")


# --------------------------------------------------------------------------- recording
ENVIRONMENT = (
    "TAGPIN_CONFIG_PARAMETER", "TAGPIN_STATE_TABLE", "TAGPIN_IDEMPOTENCY_TABLE", "TAGPIN_QUEUE_URL",
    "TAGPIN_VERIFICATION_QUEUE_URL", "TAGPIN_NOTIFY_TOPIC_ARN", "TAGPIN_WEBHOOK_SECRET",
    "TAGPIN_SECRET_STORE", "TAGPIN_DEAD_LETTER_QUEUE_URL",
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
            function = INVOKED.get()
            response = make_api_call(client, operation, params)
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
        self, client: Any, operation: str, params: dict[str, Any], response: Any, function: str | None
    ) -> None:
        service = client.meta.service_model.service_name
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
        try:
            requests = tuple(
                requests_of(service, operation, params, client.meta.region_name, account, self._keys)
            )
            error = None
        except (Underivable, KeyError, ValueError) as exc:
            requests, error = (), f"{type(exc).__name__}: {exc}"
        self._add(Call(function, f"{service}:{operation}", requests, principal, _environment(), error))

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
        resource = _arn("ecr", key.region, account, f"repository/{match['name']}")
        self._add(
            Call(
                function,
                f"registry:{method} {what}",
                (Request(action, resource),),
                key.role_arn,
                _environment(),
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


def _environment() -> tuple[tuple[str, str], ...]:
    import os

    return tuple((name, os.environ[name]) for name in ENVIRONMENT if name in os.environ)


def _from_production() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(_PRODUCTION):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


# --------------------------------------------------------------------------- roles
@dataclass(frozen=True)
class Granted:
    """One statement of a role: the template's own (``sid``), or one SAM adds (``sam`` names why)."""

    sid: str
    statement: dict[str, Any]
    sam: str | None = None

    def permits(self, request: Request) -> PermissionResult:
        return Statement(self.statement).permits(request.action, request.resource)


@dataclass(frozen=True)
class Role:
    function: str  # logical id
    statements: tuple[Granted, ...]

    def allowed(self, request: Request) -> bool:
        results = [g.permits(request) for g in self.statements]
        return PermissionResult.DENIED not in results and PermissionResult.PERMITTED in results


def _template() -> Any:
    from tests.unit import template_support

    return template_support


@cache
def _loaded() -> dict[str, Any]:
    loaded: dict[str, Any] = _template().load_template()
    return loaded


def logical_id(function: str) -> str:
    """The template's logical id of a function by its tagpin.settings name (its CodeUri's folder)."""
    ts = _template()
    template = _loaded()
    for fn in ts.function_ids(template):
        if ts.settings_key(ts.function_props(template, fn)) == function:
            return str(fn)
    raise KeyError(f"no function {function!r} in template.yaml")


def _physical(
    environment: Mapping[str, str], parameters: Mapping[str, str], function: str
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """(parameter values, {logical id: {"Ref": ..., "Arn": ..., "QueueName": ...}}) as the
    function's environment shows them: each TAGPIN_* variable the template sets to ``!Ref X``
    gives X; every other resource gets the name ``tagpin-<logical id>``."""
    ts = _template()
    template = _loaded()
    props = ts.function_props(template, function)
    params = dict(parameters)
    attrs: dict[str, dict[str, str]] = {}
    kinds = {k: v["Type"] for k, v in template["Resources"].items()}
    for logical, kind in kinds.items():
        attrs[logical] = _attributes(kind, f"tagpin-{logical}")
    # the function itself, by the name the local runtime invokes it under (LocalContext)
    attrs[function] = _attributes("AWS::Serverless::Function", f"tagpin-{ts.settings_key(props)}")
    attrs[f"{function}Role"] = {
        "Ref": f"{function}Role",
        "Arn": _arn("iam", "", ACCOUNT, f"role/{function}Role"),
    }
    for name, value in props.get("Environment", {}).get("Variables", {}).items():
        if not (isinstance(value, dict) and set(value) == {"Ref"} and name in environment):
            continue
        ref, actual = value["Ref"], environment[name]
        if ref in template.get("Parameters", {}):
            params.setdefault(ref, actual)
        elif ref in kinds:
            attrs[ref] = _attributes(kinds[ref], actual)
    return params, attrs


def _attributes(kind: str, physical: str) -> dict[str, str]:
    """Ref and GetAtt values of a resource whose Ref (name, URL or ARN) is ``physical``."""
    if kind == "AWS::DynamoDB::Table":
        return {"Ref": physical, "Arn": table_arn(physical, REGION)}
    if kind == "AWS::SQS::Queue":
        if "/" not in physical:
            physical = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{physical}"
        arn = queue_arn(physical, REGION)
        return {"Ref": physical, "Arn": arn, "QueueName": arn.rsplit(":", 1)[1]}
    if kind == "AWS::SNS::Topic":
        arn = physical if physical.startswith("arn:") else _arn("sns", REGION, ACCOUNT, physical)
        return {"Ref": arn, "TopicArn": arn, "TopicName": arn.rsplit(":", 1)[1]}
    if kind == "AWS::Logs::LogGroup":
        return {"Ref": physical, "Arn": _arn("logs", REGION, ACCOUNT, f"log-group:{physical}:*")}
    if kind == "AWS::Serverless::Function":
        return {"Ref": physical, "Arn": _arn("lambda", REGION, ACCOUNT, f"function:{physical}")}
    return {"Ref": physical, "Arn": _arn("unknown", REGION, ACCOUNT, physical)}


def _resolve(value: Any, params: Mapping[str, Any], attrs: Mapping[str, Mapping[str, str]]) -> Any:
    """Ref, Fn::GetAtt and Fn::Sub (pseudo parameters, parameters, resources) to strings."""
    pseudo = {"AWS::Partition": PARTITION, "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}

    def name(ref: str) -> Any:
        if ref in pseudo:
            return pseudo[ref]
        if "." in ref:
            logical, attribute = ref.split(".", 1)
            return attrs[logical][attribute]
        return params[ref] if ref in params else attrs[ref]["Ref"]

    if isinstance(value, list):
        return [_resolve(v, params, attrs) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        return name(value["Ref"])
    if set(value) == {"Fn::GetAtt"}:
        logical, attribute = value["Fn::GetAtt"]
        return attrs[logical][attribute]
    if set(value) == {"Fn::Sub"}:
        text, variables = (value["Fn::Sub"], {}) if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"]
        local = {k: _resolve(v, params, attrs) for k, v in variables.items()}
        return re.sub(r"\$\{([^!}][^}]*)\}", lambda m: str(local.get(m[1]) or name(m[1])), text)
    return {k: _resolve(v, params, attrs) for k, v in value.items()}


# What SAM attaches to a function's role besides its Policies (aws-sam-translator: _construct_role,
# the SQS event source's get_policy_arn, EventInvokeConfig destinations), as the AWS managed
# policies define them.
BASIC_EXECUTION = [
    {
        "Effect": "Allow",
        "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
        "Resource": "*",
    }
]
XRAY_WRITE = [
    {
        "Effect": "Allow",
        "Action": [
            "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
            "xray:GetSamplingTargets", "xray:GetSamplingStatisticSummaries",
        ],
        "Resource": "*",
    }
]  # fmt: skip
SQS_QUEUE_EXECUTION = [
    {
        "Effect": "Allow",
        "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
        "Resource": "*",
    },
    *BASIC_EXECUTION,
]


def role(function: str, environment: Mapping[str, str], parameters: Mapping[str, str] | None = None) -> Role:
    """The role of ``function`` (tagpin.settings name) for a parameter set (others: defaults), its
    resources named as ``environment`` (the TAGPIN_* variables) shows them."""
    return _role(function, tuple(sorted(environment.items())), tuple(sorted((parameters or {}).items())))


@cache
def _role(
    function: str, environment: tuple[tuple[str, str], ...], parameters: tuple[tuple[str, str], ...]
) -> Role:
    ts = _template()
    template = _loaded()
    fn = logical_id(function)
    params, attrs = _physical(dict(environment), dict(parameters), fn)
    props = ts.function_props(template, fn)
    granted: list[Granted] = []
    own = ts.evaluated_statements(
        template, props, {k: v for k, v in params.items() if k in template["Parameters"]}
    )
    for index, statement in enumerate(own):
        resolved = _resolve(statement, params, attrs)
        granted.append(Granted(str(statement.get("Sid") or f"#{index}"), resolved))
    granted += [Granted("AWSLambdaBasicExecutionRole", s, sam="every function") for s in BASIC_EXECUTION]
    if ts.evaluate(template, props.get("Tracing"), params) == "Active":
        granted += [Granted("AWSXrayWriteOnlyAccess", s, sam="Tracing: Active") for s in XRAY_WRITE]
    if ts.events_of_type(props, "SQS"):  # one managed policy, whatever the number of sources
        granted += [
            Granted("AWSLambdaSQSQueueExecutionRole", s, sam="an SQS event source")
            for s in SQS_QUEUE_EXECUTION
        ]
    for kind, destination in _destinations(props, params, attrs):
        statement = {"Effect": "Allow", "Action": DESTINATION_ACTIONS[kind], "Resource": destination}
        granted.append(Granted("EventInvokeConfig destination", statement, sam=f"an {kind} destination"))
    # AWS::IAM::Policy resources attached to the function's role (PollerPartsPolicy), when created
    for logical, resource in template["Resources"].items():
        if (
            resource["Type"] != "AWS::IAM::Policy"
            or {"Ref": f"{fn}Role"} not in resource["Properties"]["Roles"]
        ):
            continue
        condition = resource.get("Condition")
        decided = {k: v for k, v in params.items() if k in template["Parameters"]}
        if condition is not None and not ts.evaluate(template, {"Condition": condition}, decided):
            continue
        document = ts.evaluate(template, resource["Properties"]["PolicyDocument"], decided)
        for index, statement in enumerate(ts.as_list(document["Statement"])):
            sid = f"{logical}.{statement.get('Sid') or index}"
            granted.append(Granted(sid, _resolve(statement, params, attrs)))
    return Role(fn, tuple(granted))


# What Lambda calls with the function's role to deliver an invocation record, per destination type
# (SAM grants it: EventInvokeConfig's generated <Function>EventInvokeConfigOnFailure<Type>Policy).
DESTINATION_ACTIONS = {"SQS": "sqs:SendMessage", "SNS": "sns:Publish", "EventBridge": "events:PutEvents"}


def _destinations(
    props: Mapping[str, Any], params: Mapping[str, Any], attrs: Mapping[str, Mapping[str, str]]
) -> list[tuple[str, str]]:
    config = props.get("EventInvokeConfig", {}).get("DestinationConfig", {})
    return [
        (d["Type"], _resolve(d["Destination"], params, attrs)) for d in config.values() if "Destination" in d
    ]


def platform_calls(
    function: str, environment: Mapping[str, str], parameters: Mapping[str, str] | None = None
) -> list[Call]:
    """What Lambda does with the function's role, as the template configures it: poll its SQS event
    sources (ReceiveMessage, DeleteMessage, GetQueueAttributes), send the records of failed
    asynchronous invocations to its EventInvokeConfig destination (the default event bus), write
    its log group."""
    ts = _template()
    template = _loaded()
    fn = logical_id(function)
    params, attrs = _physical(environment, parameters or {}, fn)
    props = ts.function_props(template, fn)
    env = tuple(sorted(environment.items()))
    calls = []
    for event in ts.events_of_type(props, "SQS"):
        queue = _resolve(event["Queue"], params, attrs)
        requests = tuple(
            Request(f"sqs:{a}", queue) for a in ("ReceiveMessage", "DeleteMessage", "GetQueueAttributes")
        )
        calls.append(Call(function, "lambda:event source mapping", requests, environment=env))
    # Only an asynchronous invocation can fail into its destination: a schedule, an EventBridge
    # rule, an Invoke by a role (a split poll's parts). The others' destinations stay unused.
    if ts.invoked_asynchronously(template, fn):
        for kind, destination in _destinations(props, params, attrs):
            calls.append(
                Call(
                    function,
                    "lambda:OnFailure destination",
                    (Request(DESTINATION_ACTIONS[kind], destination),),
                    environment=env,
                )
            )
    if ts.evaluate(template, props.get("Tracing"), params) == "Active":  # Lambda sends its traces
        requests = (Request("xray:PutTraceSegments", "*"), Request("xray:PutTelemetryRecords", "*"))
        calls.append(Call(function, "lambda:tracing", requests, environment=env))
    group = props.get("LoggingConfig", {}).get("LogGroup")
    if group is not None:
        stream = _arn("logs", REGION, ACCOUNT, f"log-group:{_resolve(group, params, attrs)}:log-stream:local")
        requests = (Request("logs:CreateLogStream", stream), Request("logs:PutLogEvents", stream))
        calls.append(Call(function, "lambda:logs", requests, environment=env))
    return calls


# What SAM's managed policies grant that no call of a tagpin stack can use, and why it stays: SAM
# attaches AWSLambdaBasicExecutionRole to every role it makes (and AWSLambdaSQSQueueExecutionRole
# repeats it), and Lambda creates a function's log group only when it does not exist; the
# template creates each one (LoggingConfig.LogGroup).
UNUSABLE_SAM_GRANTS = frozenset({("logs:CreateLogGroup", "*")})


# --------------------------------------------------------------------------- verdicts
def denied(calls: Sequence[Call], parameters: Mapping[str, str] | None = None) -> list[str]:
    """Each call of a function's own role that its role does not allow (or that has no rule)."""
    problems = []
    for call in calls:
        if call.error is not None:
            problems.append(f"{call.function}: {call.operation}: {call.error}")
            continue
        if call.principal is not None:
            continue  # an assumed role's call: authorised by that role, in its account
        granted = role(call.function, dict(call.environment), parameters)
        for request in call.requests:
            if not granted.allowed(request):
                problems.append(
                    f"{call.function} ({granted.function}'s role) may not {request.action} "
                    f"on {request.resource} (called {call.operation})"
                )
    return problems


def unused(
    calls: Sequence[Call], functions: Sequence[str], parameters: Mapping[str, str] | None = None
) -> list[str]:
    """Each action x resource of each statement of each role that no call allows: the template's
    own, the policies attached to the role (PollerPartsPolicy), and what SAM adds (its managed
    policies, the destination's) but ``UNUSABLE_SAM_GRANTS``."""
    problems = []
    for function in functions:
        mine = [c for c in calls if c.function == function and c.principal is None and c.error is None]
        environments = {c.environment for c in mine} or {()}
        seen: set[tuple[str, str, str]] = set()
        used: set[tuple[str, str, str]] = set()
        for environment in environments:
            granted = role(function, dict(environment), parameters)
            requests = [r for c in mine if c.environment == environment for r in c.requests]
            for g in granted.statements:
                for action in as_list(g.statement.get("Action", [])):
                    for resource in as_list(g.statement.get("Resource", [])):
                        if g.sam is not None and (action, resource) in UNUSABLE_SAM_GRANTS:
                            continue
                        part = Statement(
                            {"Effect": g.statement["Effect"], "Action": action, "Resource": resource}
                        )
                        key = (g.sid, str(action), str(resource))
                        seen.add(key)
                        if any(
                            part.permits(r.action, r.resource) is PermissionResult.PERMITTED for r in requests
                        ):
                            used.add(key)
        fn = logical_id(function)
        problems += [
            f"{fn} {sid}: {action} on {resource} is allowed but no call uses it"
            for sid, action, resource in sorted(seen - used)
        ]
    return problems


def report(calls: Sequence[Call]) -> str:
    """Calls per function and operation, for the session summary."""
    counts: dict[str, dict[str, int]] = {}
    for call in calls:
        ops = counts.setdefault(call.function + (f" as {call.principal}" if call.principal else ""), {})
        ops[call.operation] = ops.get(call.operation, 0) + 1
    return json.dumps(counts, indent=1, sort_keys=True)
