"""AWS's answer to a call a role does not allow, where moto answers as if IAM were not there.

``enforcing(parameters)``: while active, every AWS call a function makes (an invocation's:
``tagpin_local.lambda_runtime.INVOKED``) is evaluated against that function's role in
template.yaml (``tests.support.iamroles``), and a call the role does not allow raises the error AWS
raises instead: a ``ClientError`` with the service's AccessDenied code. It is evaluated before moto
is called, as IAM authorises before the service acts, so a denied write changes nothing. The one
exception is a Secrets Manager read, whose ARN depends on the answer: with Secrets Manager's
6-character suffix when the secret exists, the bare name's when it does not (what moto answers
ResourceNotFound for), which a role granted ``secret:NAME-??????`` does not match: AWS answers
AccessDenied there, never ResourceNotFound. That read is made first (it changes nothing), then
evaluated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from botocore.exceptions import ClientError
from tagpin_local.lambda_runtime import INVOKED

from tests.support import iam, iamrecord, iamroles

# The error code each service answers a denied call with (their APIs' AccessDenied shapes).
_CODES = {"sqs": "AccessDenied", "sns": "AuthorizationError", "sts": "AccessDenied"}
# Reads whose ARN depends on whether the secret exists (the service's answer): evaluated after it.
_ANSWER_FIRST = ("GetSecretValue", "DescribeSecret")


def _requests(
    service: str, operation: str, params: Mapping[str, Any], region: str, found: bool
) -> list[iam.Request]:
    if service == "secretsmanager" and operation in _ANSWER_FIRST and not found:
        name = str(params["SecretId"])
        arn = (
            name
            if name.startswith("arn:")
            else f"arn:{iam.PARTITION}:secretsmanager:{region}:{iam.ACCOUNT}:secret:{name}"
        )
        return [iam.Request(f"secretsmanager:{operation}", arn)]
    return iam.requests_of(service, operation, params, region)


@contextlib.contextmanager
def enforcing(parameters: Mapping[str, str] | None = None) -> Iterator[list[str]]:
    """Deny, as AWS does, the functions' calls their roles do not allow; yields the denials."""
    import botocore.client

    denials: list[str] = []
    make_api_call = botocore.client.BaseClient._make_api_call

    def enforced(client: Any, operation: str, params: dict[str, Any]) -> Any:
        function = INVOKED.get()
        if function is None:
            return make_api_call(client, operation, params)
        service = client.meta.service_model.service_name
        region = client.meta.region_name
        role = iamroles.role(function, dict(iamrecord.environment()), parameters)

        def authorise(found: bool) -> None:
            for request in _requests(service, operation, params, region, found):
                if not role.allowed(request):
                    principal = (
                        f"arn:aws:sts::{iam.ACCOUNT}:assumed-role/{role.function}Role/tagpin-{function}"
                    )
                    message = (
                        f"User: {principal} is not authorized to perform: {request.action} on resource: "
                        f"{request.resource} because no identity-based policy allows the action"
                    )
                    denials.append(f"{function}: {request.action} on {request.resource}")
                    code = _CODES.get(service, "AccessDeniedException")
                    raise ClientError({"Error": {"Code": code, "Message": message}}, operation)

        if not (service == "secretsmanager" and operation in _ANSWER_FIRST):
            authorise(True)  # before the call, as IAM: a denied write changes nothing
            return make_api_call(client, operation, params)
        try:
            response = make_api_call(client, operation, params)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code", "") != "ResourceNotFoundException":
                raise
            authorise(False)  # no such secret: its bare name's ARN, which the role may not match
            raise
        authorise(True)
        return response

    botocore.client.BaseClient._make_api_call = enforced
    try:
        yield denials
    finally:
        botocore.client.BaseClient._make_api_call = make_api_call
