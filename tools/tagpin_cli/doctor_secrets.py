"""``tagpin doctor``'s secrets check: every secret the stack reads (the webhook's, and each the
configuration names) exists in the stack's store (``SecretStore``: an SSM SecureString parameter
``/<name>``, or a Secrets Manager secret), is readable with your credentials, and holds what its
reader expects; an SSM parameter that is not a SecureString is a warning. On AWS,
``iam:SimulatePrincipalPolicy`` also asks whether each function that reads it may
(``ssm:GetParameter`` or ``secretsmanager:GetSecretValue``); locally there is no IAM: not checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tagpin.adapters.secrets import SecretDenied, SecretNotFound, parameter_name
from tagpin.settings import SecretStore

from tagpin_cli.doctor_seat import (
    CLUSTER_READERS,
    NOTIFIERS,
    REGISTRY_READERS,
    SIGNATURE_READERS,
    Result,
    Seat,
    Status,
    allowed_by_iam,
    short,
)


@dataclass(frozen=True)
class _Secret:
    name: str
    what: str  # what it is for, in words
    readers: tuple[str, ...]
    shape: Callable[[str], str]  # the secret's text -> a description; raises ValueError when wrong


def secrets_of(seat: Seat) -> list[_Secret]:
    """Every secret the stack reads, with who reads it and the shape it must have."""
    from tagpin.adapters.registry.credentials import secret_credentials

    found: dict[str, _Secret] = {}
    if seat.stack.webhook_secret:
        found[seat.stack.webhook_secret] = _Secret(
            seat.stack.webhook_secret, "webhook credentials", ("webhook",), _webhook_shape
        )
    config = seat.config
    for host, registry in sorted(config.registries.items()):
        if registry.credentials_secret:
            kind = registry.kind_for(host)

            def shape(text: str, kind: Any = kind, name: str = registry.credentials_secret) -> str:
                secret_credentials(kind, _json_object(text), name)
                return f"{kind.value} credentials"

            found[registry.credentials_secret] = _Secret(
                registry.credentials_secret, f"registry {host}", REGISTRY_READERS, shape
            )
    for name, cluster in sorted(config.clusters.items()):
        if cluster.kubeconfig is not None and cluster.kubeconfig.secret:
            context: str | None = cluster.kubeconfig.context

            def kubeconfig(text: str, context: str | None = context) -> str:
                return _kubeconfig_shape(text, context)

            found[cluster.kubeconfig.secret] = _Secret(
                cluster.kubeconfig.secret, f"cluster {name} (kubeconfig)", CLUSTER_READERS, kubeconfig
            )
        elif cluster.service_account is not None:
            found[cluster.service_account.secret] = _Secret(
                cluster.service_account.secret,
                f"cluster {name} (service account)",
                CLUSTER_READERS,
                _service_account_shape,
            )
    notify = config.rollout.notifications.webhooks_secret
    if notify:
        found[notify] = _Secret(notify, "rollout notification webhooks", NOTIFIERS, _notify_shape)
    for gate in [f.signatures for f in config.images] + [w.signatures for w in config.rollout.waves]:
        if gate is None:
            continue
        for key in gate.keys:
            if key.secret:
                found[key.secret] = _Secret(
                    key.secret, "a signature gate's public key", SIGNATURE_READERS, _key_shape
                )
        if gate.trusted_root is not None and gate.trusted_root.secret:
            name = gate.trusted_root.secret
            found[name] = _Secret(name, "a signature gate's trusted root", SIGNATURE_READERS, _root_shape)
    return list(found.values())


def _key_shape(text: str) -> str:
    """A PEM public key the signature checker can use (ECDSA P-256, Ed25519)."""
    from tagpin.adapters.signatures.keys import load_key

    key = load_key(text)
    return f"{key.kind} public key {key.key_id[:19]}"


def _root_shape(text: str) -> str:
    from tagpin.adapters.signatures.keyless import trusted_root

    trusted_root(text)
    return "a Sigstore trusted root"


def _json_object(text: str) -> dict[str, Any]:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _webhook_shape(text: str) -> str:
    data = _json_object(text)
    if not data:
        raise ValueError("no source in it: every webhook is closed (401)")
    return "sources: " + ", ".join(sorted(data))


def _kubeconfig_shape(text: str, context: str | None) -> str:
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # Never the parser's message: it quotes the line it stopped at (a token, a key).
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"not valid YAML{at}") from None
    if not isinstance(doc, dict):
        raise ValueError("not a kubeconfig (a YAML mapping)")
    contexts = [c.get("name") for c in doc.get("contexts") or [] if isinstance(c, dict)]
    wanted = context or doc.get("current-context")
    if wanted not in contexts:
        raise ValueError(f"no context {wanted!r} (it has: {', '.join(map(str, contexts)) or 'none'})")
    return f"kubeconfig, context {wanted}"


def _service_account_shape(text: str) -> str:
    data = _json_object(text)
    missing = [k for k in ("endpoint", "token") if not data.get(k)]
    if missing:
        raise ValueError(f"no {', '.join(missing)} (needs endpoint, token and ca.crt)")
    return "endpoint, token" + (", ca.crt" if data.get("ca.crt") else " (no ca.crt)")


def _notify_shape(text: str) -> str:
    data = _json_object(text)
    unknown = set(data) - {"slack", "teams", "http", "slack_signing_secret"}
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} (slack, teams, http, slack_signing_secret)")
    hooks = sorted(k for k in data if k != "slack_signing_secret")
    signing = "; a Slack signing secret (approval buttons)" if "slack_signing_secret" in data else ""
    return "webhooks: " + (", ".join(hooks) or "none") + signing


# What reads a secret in each store (the action the functions' roles must allow).
READ_ACTION = {
    SecretStore.SSM: "ssm:GetParameter",
    SecretStore.SECRETS_MANAGER: "secretsmanager:GetSecretValue",
}


def create_command(store: SecretStore, name: str) -> str:
    """How the operator creates the secret ``name`` in ``store`` (docs/deploying.md)."""
    if store is SecretStore.SSM:
        return f"aws ssm put-parameter --type SecureString --name {parameter_name(name)} --value ..."
    return f"aws secretsmanager create-secret --name {name} --secret-string ..."


def check_secrets(seat: Seat) -> list[Result]:
    from tagpin import wiring

    store = SecretStore(seat.stack.secret_store)
    results = []
    for secret in secrets_of(seat):
        subject = secret.name
        create = f"{create_command(store, secret.name)} (docs/deploying.md)"
        try:
            text = wiring.secret_text(secret.name)
        except SecretDenied:  # the operator's own read: a permission, or a key policy
            results.append(
                Result(
                    "secret",
                    subject,
                    Status.FAIL,
                    f"{secret.what}: not readable with your credentials (AccessDenied)",
                    f"check your permission ({READ_ACTION[store]}, kms:Decrypt on its key) and the KMS "
                    f"key policy; if it does not exist (Secrets Manager answers AccessDenied then too, "
                    f"when your policy names its ARN): {create}",
                )
            )
            continue
        except SecretNotFound as exc:
            results.append(Result("secret", subject, Status.FAIL, f"{secret.what}: {exc}", create))
            continue
        except Exception as exc:
            results.append(
                Result(
                    "secret",
                    subject,
                    Status.FAIL,
                    f"{secret.what}: not readable: {short(exc)}",
                    f"check your permission to read it ({READ_ACTION[store]}) and the KMS key policy",
                )
            )
            continue
        try:
            shape = secret.shape(text)
        except (ValueError, TypeError, KeyError) as exc:  # never quote the text: it is a secret
            results.append(
                Result(
                    "secret",
                    subject,
                    Status.FAIL,
                    f"{secret.what}: unusable: {short(exc)}",
                    "put the expected fields in it (docs/registries.md, docs/webhooks.md, docs/deploying.md)",
                )
            )
            continue
        arn, kind, located = _located(store, secret.name)
        access, denied = _function_access(seat, secret, store, arn, located)
        status = Status.FAIL if denied else Status.OK
        fix = (
            "the functions may read only secrets under tagpin/; redeploy the template's policies"
            if denied
            else ""
        )
        detail = f"{secret.what}: {shape}; {access}"
        if kind is not None and kind != "SecureString":
            # a String parameter is stored and shown in plain text, to anyone who may read parameters
            detail = f"{secret.what}: a {kind} parameter, not a SecureString; {shape}; {access}"
            if not denied:
                status = Status.WARN
                fix = (
                    f"store it encrypted: aws ssm delete-parameter --name {parameter_name(secret.name)}, "
                    f"then {create_command(store, secret.name)}"
                )
        results.append(Result("secret", subject, status, detail, fix))
    return results


def _located(store: SecretStore, name: str) -> tuple[str | None, str | None, str]:
    """The secret's ARN and, in SSM, its parameter type (read without decryption); on failure
    (None, None, why)."""
    from tagpin import wiring

    try:
        if store is SecretStore.SSM:
            parameter = wiring.aws("ssm").get_parameter(Name=parameter_name(name))["Parameter"]
            return str(parameter["ARN"]), str(parameter.get("Type", "")), ""
        return str(wiring.aws("secretsmanager").describe_secret(SecretId=name)["ARN"]), None, ""
    except Exception as exc:
        return None, None, short(exc)


def _function_access(
    seat: Seat, secret: _Secret, store: SecretStore, arn: str | None, located: str
) -> tuple[str, list[str]]:
    """Whether each reader's role may read the secret: IAM's policy simulator on AWS."""
    readers = ", ".join(secret.readers)
    if seat.local:
        return f"read by {readers} (their access is not checked locally: no IAM)", []
    if arn is None:
        return f"read by {readers} (their access not checked: {located})", []
    try:
        denied = [
            function
            for function in secret.readers
            if (role := seat.roles.get(function)) is not None
            and not allowed_by_iam(role, READ_ACTION[store], arn)
        ]
    except Exception as exc:
        return f"read by {readers} (their access not checked: {short(exc)})", []
    if denied:
        return f"{', '.join(denied)} may not read it (IAM policy simulator)", denied
    return f"readable by {readers} (IAM policy simulator)", []
