"""IAM proven from what the code calls: every AWS request a function makes, evaluated against that
function's own role as template.yaml defines it. By concern:

- here, what a call is authorised as and how a policy decides: ``requests_of`` turns each call into
  the IAM requests AWS authorises it as, an action and a resource ARN per request (``BatchGetItem``
  on two tables is two requests, ``TransactWriteItems`` one per item and kind, ``SendMessageBatch``
  is ``sqs:SendMessage``; a secret's ARN carries the 6-character suffix Secrets Manager appends; a
  SecureString or a secret created with a customer key adds ``kms:Decrypt`` on that key). Registry
  API reads of an ECR registry are ``ecr:BatchGetImage`` on the repository (referrers too; blobs
  ``ecr:GetDownloadUrlForLayer``; tag lists ``ecr:ListImages``). A call made with an assumed role's
  credentials is that role's, not the function's: it is recorded and not evaluated (the role lives
  in another account). Evaluation is moto's policy engine
  (``moto.iam.access_control.IAMPolicyStatement``: Allow/Deny, NotAction, Principal, Conditions),
  with IAM's wildcard matching restored: moto 5.2.5 turns a pattern into a regular expression
  unescaped, so ``.`` matches any character and ``?`` (one character, as in
  ``secret:name-??????``) is a regex error; and it compares actions case-sensitively.
  ``Statement`` fixes those two and refuses NotResource (which moto ignores).
- ``tests.support.iamrecord``: recording every call each function makes (``Recorder``).
- ``tests.support.iamroles``: each function's role from the template (``role``), and the verdicts
  over recorded calls (``denied``, ``unused``).
- ``tests.support.iamplatform``: what Lambda itself does with a role (``platform_calls``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlparse

from moto.iam.access_control import IAMPolicyStatement, PermissionResult

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


def make_arn(service: str, region: str, account: str, resource: str) -> str:
    return f"arn:{PARTITION}:{service}:{region}:{account}:{resource}"


def queue_arn(url: str, region: str) -> str:
    """The ARN of a queue URL (``https://sqs.<region>.amazonaws.com/<account>/<name>``, or moto's)."""
    if url.startswith("arn:"):
        return url
    account, name = urlparse(url).path.strip("/").split("/")[-2:]
    return make_arn("sqs", region, account, name)


def table_arn(name: str, region: str, account: str = ACCOUNT) -> str:
    return name if name.startswith("arn:") else make_arn("dynamodb", region, account, f"table/{name}")


def parameter_arn(name: str, region: str, account: str = ACCOUNT) -> str:
    if name.startswith("arn:"):
        return name
    return make_arn("ssm", region, account, "parameter" + (name if name.startswith("/") else "/" + name))


def secret_arn(secret_id: str, region: str, account: str = ACCOUNT) -> str:
    """A secret's ARN as IAM sees it: the name, "-" and Secrets Manager's 6 random characters."""
    if secret_id.startswith("arn:"):
        return secret_id
    return make_arn("secretsmanager", region, account, f"secret:{secret_id}-{SECRET_SUFFIX}")


def key_arn(key: str, region: str, account: str = ACCOUNT) -> str:
    if key.startswith("arn:"):
        return key
    return make_arn("kms", region, account, key if key.startswith("alias/") else f"key/{key}")


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
                make_arn("sqs", region, params.get("QueueOwnerAWSAccountId", account), params["QueueName"]),
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
        return one("DescribeCluster", make_arn("eks", region, account, f"cluster/{params['name']}"))
    if service == "ecr":
        if operation == "GetAuthorizationToken":
            return one("GetAuthorizationToken", "*")
        if operation in ("BatchGetImage", "DescribeImages", "GetDownloadUrlForLayer"):
            registry = params.get("registryId") or account
            return one(operation, make_arn("ecr", region, registry, f"repository/{params['repositoryName']}"))
    if service == "kms" and operation in ("Decrypt", "GetPublicKey"):
        return one(operation, key_arn(params["KeyId"], region, account))
    if service == "lambda" and operation == "Invoke":  # a split poll's parts: the poller itself
        name = str(params["FunctionName"])
        arn = name if name.startswith("arn:") else make_arn("lambda", region, account, f"function:{name}")
        return [Request("lambda:InvokeFunction", arn)]
    raise Underivable(f"no IAM requests known for {service}:{operation}: add a rule to tests/support/iam.py")


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
    # the statements of its permissions boundary (None: none): a request is allowed when both the
    # role's statements and the boundary's allow it (IAM's evaluation for a role with a boundary)
    boundary: tuple[Granted, ...] | None = None

    def allowed(self, request: Request) -> bool:
        bounded = self.boundary is None or _allows(self.boundary, request)
        return bounded and _allows(self.statements, request)


def _allows(statements: tuple[Granted, ...], request: Request) -> bool:
    results = [g.permits(request) for g in statements]
    return PermissionResult.DENIED not in results and PermissionResult.PERMITTED in results
