"""Where the CLI finds tagpin: a deployed stack's CloudFormation outputs, or the local stack.

Either way the result is the same environment the functions get (TAGPIN_* variables and, for
the local stack, the AWS endpoint), so the CLI reuses ``tagpin.wiring`` unchanged.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOCAL_FILE = Path(".tagpin-local/endpoints.json")
DEFAULT_STACK = "tagpin"


class StackNotFound(RuntimeError):
    """tagpin's resources cannot be found, or AWS credentials are missing (exit code 3)."""


@dataclass(frozen=True)
class Target:
    state_table: str
    queue_url: str
    dead_letter_queue_url: str
    config_parameter: str
    aws_endpoint: str | None = None
    # What else the stack says about itself: ``tagpin doctor`` reads these.
    name: str = "local"  # the stack's name, or "local"
    region: str | None = None
    webhook_url: str | None = None  # the base: <webhook_url>/<source>
    alarm_topic_arn: str | None = None
    webhook_secret: str | None = None
    secret_store: str = "ssm"  # noqa: S105 (a store: tagpin.settings.SecretStore, not a secret)
    outputs: dict[str, str] = field(default_factory=dict)  # CloudFormation outputs (AWS only)
    parameters: dict[str, str] = field(default_factory=dict)  # CloudFormation parameters (AWS only)
    endpoints: dict[str, Any] = field(default_factory=dict)  # the endpoints file (local only)

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


def write_local(endpoints: dict[str, Any], path: Path = LOCAL_FILE) -> None:
    """The endpoints file, readable by its owner only: it holds the console's sign-in token."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(json.dumps(endpoints, indent=2))


def read_local(path: Path = LOCAL_FILE) -> dict[str, Any]:
    """The endpoints file ``tagpin local`` wrote."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise StackNotFound(f"no local stack: {path} not found (start one with `tagpin local`)") from None
    except (OSError, ValueError) as exc:
        raise StackNotFound(f"{path} is not an endpoints file of `tagpin local`: {exc}") from None
    if not isinstance(data, dict):
        raise StackNotFound(f"{path} is not an endpoints file of `tagpin local`")
    return data


def local(path: Path = LOCAL_FILE) -> Target:
    data = read_local(path)
    try:
        return Target(
            state_table=data["state_table"],
            queue_url=data["queue_url"],
            dead_letter_queue_url=data["dead_letter_queue_url"],
            config_parameter=data["config_parameter"],
            aws_endpoint=data["aws_endpoint"],
            webhook_url=str(data.get("webhook_url") or "").removesuffix("/{source}") or None,
            alarm_topic_arn=data.get("alarm_topic_arn") or None,
            webhook_secret=data.get("webhook_secret") or None,
            secret_store=data.get("secret_store") or "ssm",
            endpoints=data,
        )
    except KeyError as exc:
        raise StackNotFound(f"{path} has no {exc}: restart `tagpin local`") from None


def stack(name: str, region: str | None = None) -> Target:
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
        return Target(
            state_table=outputs["StateTableName"],
            queue_url=outputs["ChangesQueueUrl"],
            dead_letter_queue_url=outputs["ChangesDeadLetterQueueUrl"],
            config_parameter=parameters.get("ConfigParameterName") or "/tagpin/config",
            name=name,
            region=session.region_name,
            webhook_url=outputs.get("WebhookUrl"),
            alarm_topic_arn=outputs.get("AlarmTopicArn"),
            webhook_secret=parameters.get("WebhookSecretName") or "tagpin/webhook",
            # A stack deployed before the template had SecretStore reads Secrets Manager.
            secret_store=parameters.get("SecretStore") or "secretsmanager",
            outputs=outputs,
            parameters=parameters,
        )
    except KeyError as exc:
        raise StackNotFound(f"stack {name!r} has no output {exc}; is it a tagpin stack?") from None
