"""Where the CLI finds tagpin: a deployed stack's CloudFormation outputs, or the local stack.

Either way the result is the same environment the functions get (TAGPIN_* variables and, for
the local stack, the AWS endpoint), so the CLI reuses ``tagpin.wiring`` unchanged.

A ``Stack`` is where tagpin runs; a *target* is a workload's container (cluster/namespace/kind/
name/container), as everywhere else in tagpin. A ``Stack`` carries no secret, and the endpoints
file's secrets are ``SecretStr`` values (``tagpin_local.endpoints``), revealed only in the file.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from tagpin_local.endpoints import LocalEndpoints

LOCAL_FILE = Path(".tagpin-local/endpoints.json")
DEFAULT_STACK = "tagpin"


class StackNotFound(RuntimeError):
    """tagpin's resources cannot be found, or AWS credentials are missing (exit code 3)."""


@dataclass(frozen=True)
class Stack:
    """The stack tagpin runs in: its resources, as its outputs (AWS) or endpoints file (local) say."""

    state_table: str
    queue_url: str
    dead_letter_queue_url: str
    config_parameter: str
    aws_endpoint: str | None = None
    # What else the stack says about itself: ``tagpin doctor`` reads these.
    name: str = "local"  # the stack's name, or "local"
    region: str | None = None
    webhook_url: str | None = None  # the base: <webhook_url>/<source>
    console_url: str | None = None
    alarm_topic_arn: str | None = None
    webhook_secret: str | None = None  # the secret's name
    secret_store: str = "ssm"  # noqa: S105 (a store: tagpin.settings.SecretStore, not a secret)
    outputs: dict[str, str] = field(default_factory=dict)  # CloudFormation outputs (AWS only)
    parameters: dict[str, str] = field(default_factory=dict)  # CloudFormation parameters (AWS only)

    @property
    def local(self) -> bool:
        return self.aws_endpoint is not None

    def apply(self) -> None:
        os.environ["TAGPIN_STATE_TABLE"] = self.state_table
        os.environ["TAGPIN_QUEUE_URL"] = self.queue_url
        os.environ["TAGPIN_CONFIG_PARAMETER"] = self.config_parameter
        os.environ.pop("TAGPIN_CONFIG_FILE", None)
        os.environ["TAGPIN_SECRET_STORE"] = self.secret_store
        if self.aws_endpoint:
            os.environ["AWS_ENDPOINT_URL"] = self.aws_endpoint
            for key, value in (("AWS_ACCESS_KEY_ID", "local"), ("AWS_SECRET_ACCESS_KEY", "local")):
                os.environ.setdefault(key, value)
            os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        elif self.region:
            os.environ["AWS_DEFAULT_REGION"] = self.region
        from tagpin import wiring

        wiring.reset()


def write_local(endpoints: LocalEndpoints | dict[str, Any], path: Path = LOCAL_FILE) -> None:
    """The endpoints file, readable by its owner only: it holds the console's sign-in token."""
    if not isinstance(endpoints, LocalEndpoints):
        endpoints = LocalEndpoints.model_validate(endpoints)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(json.dumps(endpoints.revealed(), indent=2))


def read_local(path: Path = LOCAL_FILE) -> LocalEndpoints:
    """The endpoints file ``tagpin local`` wrote. An error names the file and the missing or
    malformed keys, never a value (the file holds secrets)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise StackNotFound(f"no local stack: {path} not found (start one with `tagpin local`)") from None
    except (OSError, ValueError) as exc:
        # json's message gives a position, never the text
        raise StackNotFound(f"{path} is not an endpoints file of `tagpin local`: {exc}") from None
    if not isinstance(data, dict):
        raise StackNotFound(f"{path} is not an endpoints file of `tagpin local`")
    try:
        return LocalEndpoints.model_validate(data)
    except ValidationError as exc:
        wrong = ", ".join(
            f"{'.'.join(map(str, e['loc']))} ({e['msg']})" for e in exc.errors(include_input=False)
        )
        raise StackNotFound(f"{path}: {wrong}: restart `tagpin local`") from None


def local(path: Path = LOCAL_FILE) -> Stack:
    data = read_local(path)
    return Stack(
        state_table=data.state_table,
        queue_url=data.queue_url,
        dead_letter_queue_url=data.dead_letter_queue_url,
        config_parameter=data.config_parameter,
        aws_endpoint=data.aws_endpoint,
        webhook_url=data.webhook_url.removesuffix("/{source}") or None,
        console_url=data.console_url or None,
        alarm_topic_arn=data.alarm_topic_arn or None,
        webhook_secret=data.webhook_secret or None,
        secret_store=data.secret_store or "ssm",
    )


def answers(stack: Stack, timeout: float = 2.0) -> bool:
    """Whether a local stack's AWS endpoint takes a connection: `tagpin local` stopped without
    cleaning up (killed) leaves its endpoints file behind, naming ports nothing listens on."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(stack.aws_endpoint or "")
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        with socket.create_connection((url.hostname or "127.0.0.1", port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def stopped(stack: Stack) -> StackNotFound:
    """The error of a local stack whose endpoint does not answer (exit code 3, as no stack)."""
    return StackNotFound(
        f"no local stack answers at {stack.aws_endpoint} (its endpoints file is left from one that "
        "stopped): start one with `tagpin local`"
    )


def deployed(name: str, region: str | None = None) -> Stack:
    """A stack deployed on AWS, by its CloudFormation outputs and parameters."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        session = boto3.session.Session(region_name=region)
        cfn = session.client("cloudformation")
        described = cfn.describe_stacks(StackName=name)["Stacks"][0]
    except NoCredentialsError:
        raise StackNotFound("no AWS credentials: configure a profile or environment variables") from None
    except (ClientError, BotoCoreError) as exc:
        raise StackNotFound(f"stack {name!r} not found or not readable: {exc}") from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    parameters = {p["ParameterKey"]: p.get("ParameterValue", "") for p in described.get("Parameters", [])}
    try:
        return Stack(
            state_table=outputs["StateTableName"],
            queue_url=outputs["ChangesQueueUrl"],
            dead_letter_queue_url=outputs["ChangesDeadLetterQueueUrl"],
            config_parameter=parameters.get("ConfigParameterName") or "/tagpin/config",
            name=name,
            region=session.region_name,
            webhook_url=outputs.get("WebhookUrl"),
            console_url=outputs.get("ConsoleUrl"),
            alarm_topic_arn=outputs.get("AlarmTopicArn"),
            webhook_secret=parameters.get("WebhookSecretName") or "tagpin/webhook",
            # A stack deployed before the template had SecretStore reads Secrets Manager.
            secret_store=parameters.get("SecretStore") or "secretsmanager",
            outputs=outputs,
            parameters=parameters,
        )
    except KeyError as exc:
        raise StackNotFound(f"stack {name!r} has no output {exc}; is it a tagpin stack?") from None


def chosen(args: argparse.Namespace) -> Stack:
    """The stack the command runs against: the local one (--local, --endpoints), else the deployed
    one named by --stack, $TAGPIN_STACK or the default."""
    if args.local or args.endpoints is not None:
        return local(args.endpoints or LOCAL_FILE)
    name = args.stack or os.environ.get("TAGPIN_STACK", DEFAULT_STACK)
    return deployed(name, args.region)
