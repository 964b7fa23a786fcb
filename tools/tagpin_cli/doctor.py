"""``tagpin doctor``: check a stack end to end, read-only, and say what to fix.

Each check is a small function of the :class:`Seat` (where the doctor sits: the stack, what it
learned so far) returning :class:`Result` s: a name, a subject, ok / warn / fail / skip, a detail
and what to fix. Nothing is written anywhere: no state, no queue, no secret, no workload; the
webhook gets an unauthenticated POST, which it must refuse (401) before reading anything.

What is decided where (docs/troubleshooting.md, "tagpin doctor"):

- stack: the outputs (AWS) or the endpoints file (local); the state table and the queues answer.
- functions (AWS only): each function is active, its last update succeeded and its environment
  has every ``TAGPIN_*`` variable it needs (``tagpin.settings.NEEDS``). Locally the handlers run
  in-process with the local stack's environment: skipped.
- configuration: the SSM parameter exists and validates; the followed tags (configuration and
  the reconciler's index of labelled workloads).
- secrets: each secret the configuration names (and the webhook's) exists in the stack's secret
  store (``SecretStore``: an SSM SecureString parameter ``/<name>``, or a Secrets Manager secret)
  and holds what its reader expects; an SSM parameter that is not a SecureString is a warning. On
  AWS, ``iam:SimulatePrincipalPolicy`` also asks whether each function that reads it may
  (``ssm:GetParameter`` or ``secretsmanager:GetSecretValue``); locally there is no IAM: not checked.
- registries: one followed tag per registry, resolved (HEAD) with the registry's credentials.
- clusters: see :mod:`tagpin_cli.doctor_clusters`.
- webhook: an unauthenticated POST to ``<WebhookUrl>/distribution`` must answer 401.
- alarms: the alarm topic has a confirmed subscription.
- dead letters: the dead-letter queue is empty, and so is the queue of undelivered events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from tagpin.adapters.secrets import SecretNotFound, parameter_name
from tagpin.settings import SecretStore

from tagpin_cli.environment import Stack

FUNCTIONS = ("poller", "webhook", "consumer", "reconciler", "console")
# Deployed with a parameter only: the console with ConsoleJwtIssuer (its output is there then).
OPTIONAL_FUNCTIONS = ("console",)
# resolve tags with the registry's credentials; the consumer reads manifests and signatures (trust gates)
REGISTRY_READERS = ("poller", "webhook", "reconciler", "consumer")
CLUSTER_READERS = ("consumer", "reconciler")  # reach clusters
NOTIFIERS = ("consumer", "reconciler", "console")  # the reconciler: holds; the console: decisions, Slack
SIGNATURE_READERS = ("consumer",)  # signature gates' keys and trusted roots


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Result:
    check: str  # stack, functions, configuration, secret, registry, cluster, permissions, webhook, ...
    subject: str  # what was checked: a secret's name, a registry host, a cluster, a function
    status: Status
    detail: str
    fix: str = ""


@dataclass
class Seat:
    """Where the doctor sits, and what the checks so far learned."""

    stack: Stack
    config: Any = None  # TagpinConfig once the configuration check passed
    followed: list[Any] = field(default_factory=list)  # FollowedImage: configuration + index
    roles: dict[str, str] = field(default_factory=dict)  # function -> IAM role ARN (AWS)
    stack_id: str = ""

    @property
    def local(self) -> bool:
        return self.stack.local


@dataclass
class Report:
    stack: str
    local: bool
    results: list[Result]
    missing_stack: bool = False

    def count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status is status)

    def exit_code(self, strict: bool = False) -> int:
        if self.missing_stack:
            return 3  # main.EXIT_ENVIRONMENT
        failed = self.count(Status.FAIL) + (self.count(Status.WARN) if strict else 0)
        return 1 if failed else 0  # main.EXIT_FAILED

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "local": self.local,
            "ok": self.count(Status.FAIL) == 0 and not self.missing_stack,
            "summary": {s.value: self.count(s) for s in Status},
            "checks": [asdict(r) | {"status": r.status.value} for r in self.results],
        }


Check = Callable[[Seat], list[Result]]


# -- the checks ----------------------------------------------------------------------------------
def check_stack(seat: Seat) -> list[Result]:
    from tagpin import wiring

    t = seat.stack
    found: list[str] = []
    if seat.local:
        where = f"local stack (AWS endpoint {t.aws_endpoint})"
    else:
        described = wiring.aws("cloudformation").describe_stacks(StackName=t.name)["Stacks"][0]
        seat.stack_id = described.get("StackId", "")
        state = str(described.get("StackStatus", ""))
        required = [f for f in FUNCTIONS if f not in OPTIONAL_FUNCTIONS]
        wanted = ("WebhookUrl", "AlarmTopicArn", *(f"{f.capitalize()}FunctionName" for f in required))
        missing = [k for k in wanted if k not in t.outputs]
        if missing or not state.endswith("_COMPLETE") or "ROLLBACK" in state:
            return [
                Result(
                    "stack",
                    t.name,
                    Status.FAIL,
                    f"status {state}" + (f"; outputs missing: {', '.join(missing)}" if missing else ""),
                    "deploy the current template: make build && sam deploy (docs/deploying.md)",
                )
            ]
        where = f"stack {t.name} ({state}, {len(t.outputs)} outputs)"
        seat.roles = _roles(t.name, seat.stack_id)
    table = wiring.aws("dynamodb").describe_table(TableName=t.state_table)["Table"]
    found.append(f"table {t.state_table} {table.get('TableStatus', '?')}")
    sqs = wiring.aws("sqs")
    for url in (t.queue_url, t.dead_letter_queue_url):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    found.append("changes queue and its dead-letter queue answer")
    return [Result("stack", t.name, Status.OK, f"{where}: " + "; ".join(found))]


def _roles(stack: str, stack_id: str) -> dict[str, str]:
    """Each function's IAM role ARN, from the stack's resources (SAM names them <Function>Role)."""
    from tagpin import wiring

    parts = stack_id.split(":")  # arn:<partition>:cloudformation:<region>:<account>:stack/...
    if len(parts) < 5:
        return {}
    partition, account = parts[1], parts[4]
    resources = wiring.aws("cloudformation").describe_stack_resources(StackName=stack)["StackResources"]
    by_id = {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in resources}
    return {
        f: f"arn:{partition}:iam::{account}:role/{by_id[key]}"
        for f in FUNCTIONS
        if (key := f"{f.capitalize()}FunctionRole") in by_id and by_id[key]
    }


def check_functions(seat: Seat) -> list[Result]:
    from tagpin import wiring
    from tagpin.settings import CONFIG, NEEDS, OPTIONAL, variable

    if seat.local:
        return [
            Result(
                "functions",
                "all",
                Status.SKIP,
                "the local stack runs the handlers in-process with its own environment",
            )
        ]
    results = []
    for function in FUNCTIONS:
        name = seat.stack.outputs.get(f"{function.capitalize()}FunctionName", "")
        if not name and function in OPTIONAL_FUNCTIONS:
            results.append(
                Result("functions", function, Status.SKIP, "not deployed (ConsoleJwtIssuer is empty)")
            )
            continue
        conf = wiring.aws("lambda").get_function_configuration(FunctionName=name)
        env = (conf.get("Environment") or {}).get("Variables") or {}
        missing = [
            variable(n) if n != CONFIG else variable("config_parameter")
            for n in NEEDS[function]
            if n not in OPTIONAL
            and not (
                env.get(variable("config_parameter")) or env.get(variable("config_file"))
                if n == CONFIG
                else env.get(variable(n))
            )
        ]
        state, update = conf.get("State", "Active"), conf.get("LastUpdateStatus", "Successful")
        if missing or state != "Active" or update == "Failed":
            problem = f"state {state}, last update {update}" + (
                f"; environment lacks {', '.join(missing)}" if missing else ""
            )
            results.append(
                Result("functions", function, Status.FAIL, problem, "redeploy the stack (sam deploy)")
            )
        else:
            results.append(Result("functions", function, Status.OK, f"{name}: active, environment complete"))
    return results


def check_configuration(seat: Seat) -> list[Result]:
    from tagpin import wiring
    from tagpin.domain.config import ConfigError, NotConfigured

    parameter = seat.stack.config_parameter
    push = f"tagpin config validate FILE && tagpin config push FILE (parameter {parameter})"
    try:
        config = wiring.config()
    except NotConfigured as exc:
        return [Result("configuration", parameter, Status.FAIL, str(exc), push)]
    except ConfigError as exc:
        return [Result("configuration", parameter, Status.FAIL, f"invalid: {exc}", push)]
    seat.config = config
    configured = {t.id for f in config.images for t in f.targets}
    try:
        seat.followed = sorted(wiring.followed().values(), key=lambda f: f.image)
    except Exception as exc:
        seat.followed = list(config.images)
        return [
            Result(
                "configuration",
                parameter,
                Status.WARN,
                f"valid, but the index of labelled workloads could not be read: {_short(exc)}",
                "check the state table (the stack check)",
            )
        ]
    labelled = {t.id for f in seat.followed for t in f.targets} - configured
    detail = (
        f"valid: {len(config.clusters)} cluster(s), {len(config.registries)} registry setting(s), "
        f"{len(seat.followed)} followed tag(s), {len(configured)} configured target(s), "
        f"{len(labelled)} labelled target(s)"
    )
    if not seat.followed:
        return [
            Result(
                "configuration",
                parameter,
                Status.WARN,
                detail + ": nothing is followed",
                "list images in the configuration, or label workloads tagpin.dev/follow=true "
                "(docs/clusters.md)",
            )
        ]
    return [Result("configuration", parameter, Status.OK, detail)]


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
        except SecretNotFound as exc:
            results.append(Result("secret", subject, Status.FAIL, f"{secret.what}: {exc}", create))
            continue
        except Exception as exc:
            results.append(
                Result(
                    "secret",
                    subject,
                    Status.FAIL,
                    f"{secret.what}: not readable: {_short(exc)}",
                    f"check your permission to read it ({READ_ACTION[store]})",
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
                    f"{secret.what}: unusable: {_short(exc)}",
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
        return None, None, _short(exc)


def _function_access(
    seat: Seat, secret: _Secret, store: SecretStore, arn: str | None, located: str
) -> tuple[str, list[str]]:
    """Whether each reader's role may read the secret: IAM's policy simulator on AWS."""
    readers = ", ".join(secret.readers)
    if seat.local:
        return f"read by {readers} (their access is not checked locally: no IAM)", []
    if arn is None:
        return f"read by {readers} (their access not checked: {located})", []
    from tagpin import wiring

    try:
        denied = []
        for function in secret.readers:
            role = seat.roles.get(function)
            if role is None:
                continue
            evaluation = wiring.aws("iam").simulate_principal_policy(
                PolicySourceArn=role, ActionNames=[READ_ACTION[store]], ResourceArns=[arn]
            )["EvaluationResults"]
            if not evaluation or evaluation[0].get("EvalDecision") != "allowed":
                denied.append(function)
    except Exception as exc:
        return f"read by {readers} (their access not checked: {_short(exc)})", []
    if denied:
        return f"{', '.join(denied)} may not read it (IAM policy simulator)", denied
    return f"readable by {readers} (IAM policy simulator)", []


def check_registries(seat: Seat) -> list[Result]:
    from tagpin import wiring
    from tagpin.adapters.registry.credentials import CredentialsError
    from tagpin.ports.registry import AuthError, ManifestNotFound, RegistryError

    by_host: dict[str, Any] = {}
    for followed in seat.followed:
        by_host.setdefault(followed.ref.registry, followed)
    results = []
    for host, followed in sorted(by_host.items()):
        settings = seat.config.registry(host)
        secret = settings.credentials_secret
        resolve = f"tagpin resolve {followed.image}"
        try:
            access = wiring.registry_access(host)
            resolution = wiring.registry_client().resolve(followed.ref)
        except AuthError as exc:
            fix = (
                f"check the username and password in the secret {secret} (docs/registries.md), then {resolve}"
                if secret
                else f"the registry wants credentials: set registries.{host}.credentials_secret "
                "(docs/registries.md)"
            )
            results.append(Result("registry", host, Status.FAIL, f"credentials refused: {_short(exc)}", fix))
            continue
        except ManifestNotFound:
            results.append(
                Result(
                    "registry",
                    host,
                    Status.WARN,
                    f"answers, but {followed.image} does not exist (not pushed yet?)",
                    f"push the tag, or fix the image name; then {resolve}",
                )
            )
            continue
        except (RegistryError, CredentialsError) as exc:
            results.append(
                Result(
                    "registry",
                    host,
                    Status.FAIL,
                    _short(exc),
                    f"check the registry's address, network access and TLS (registries.{host}); "
                    f"then {resolve}",
                )
            )
            continue
        auth = "with credentials" if access.credentials else "anonymously"
        results.append(
            Result(
                "registry",
                host,
                Status.OK,
                f"{resolution.method} {followed.ref.repository}:{followed.ref.tag} {auth} -> "
                f"{resolution.digest[:19]}…",
            )
        )
    return results


def check_console(seat: Seat) -> list[Result]:
    """The console's routes are behind the JWT authorizer: a request without a token answers 401."""
    import httpx

    url = seat.stack.console_url or ""
    if not url:
        return [Result("console", "-", Status.SKIP, "no console (ConsoleJwtIssuer is empty)")]
    try:
        response = httpx.get(url + "/targets", timeout=15)
    except httpx.HTTPError as exc:
        return [Result("console", url, Status.FAIL, f"no answer: {_short(exc)}", "check the HTTP API")]
    answer = f"a request without a token answered {response.status_code}"
    if response.status_code == 401:
        return [Result("console", url, Status.OK, answer + " (nothing is readable without signing in)")]
    return [
        Result(
            "console",
            url,
            Status.FAIL,
            f"{answer}, not 401",
            "every console route must be behind the JWT authorizer: redeploy the template (docs/console.md)",
        )
    ]


def check_webhook(seat: Seat) -> list[Result]:
    import httpx

    base = seat.stack.webhook_url
    if not base:
        return [Result("webhook", "-", Status.SKIP, "the stack has no webhook URL output")]
    url = base.rstrip("/") + "/distribution"
    try:  # no credentials: the function must refuse it before reading or enqueueing anything
        response = httpx.post(url, content=b"{}", headers={"content-type": "application/json"}, timeout=15)
    except httpx.HTTPError as exc:
        return [
            Result(
                "webhook", url, Status.FAIL, f"no answer: {_short(exc)}", "check the HTTP API (WebhookApi)"
            )
        ]
    answer = f"an unauthenticated POST answered {response.status_code}"
    if response.status_code == 401:
        return [Result("webhook", url, Status.OK, answer + " (the route and the function work)")]
    if response.status_code == 503:
        body = response.text[:200]
        return [
            Result(
                "webhook",
                url,
                Status.FAIL,
                f"{answer}: {body}",
                "create the webhook secret and the configuration",
            )
        ]
    if response.status_code == 404:
        return [
            Result(
                "webhook", url, Status.FAIL, answer, "the route POST /webhooks/{source} is missing: redeploy"
            )
        ]
    return [
        Result(
            "webhook",
            url,
            Status.FAIL,
            f"{answer}, not 401",
            "read the webhook function's log (docs/troubleshooting.md)",
        )
    ]


def check_alarms(seat: Seat) -> list[Result]:
    from tagpin import wiring

    topic = seat.stack.alarm_topic_arn
    if not topic:
        return [Result("alarms", "-", Status.SKIP, "the stack has no alarm topic output (AlarmTopicArn)")]
    subscriptions = wiring.aws("sns").list_subscriptions_by_topic(TopicArn=topic).get("Subscriptions", [])
    confirmed = [s for s in subscriptions if s.get("SubscriptionArn", "").startswith("arn:")]
    pending = len(subscriptions) - len(confirmed)
    subscribe = (
        "deploy with AlarmEmail=<address>, or: aws sns subscribe --topic-arn "
        f"{topic} --protocol email --notification-endpoint <address>"
    )
    if confirmed:
        protocols = ", ".join(sorted({s.get("Protocol", "?") for s in confirmed}))
        return [
            Result("alarms", topic, Status.OK, f"{len(confirmed)} confirmed subscription(s) ({protocols})")
        ]
    if pending:
        return [
            Result(
                "alarms",
                topic,
                Status.WARN,
                f"{pending} subscription(s) pending",
                "confirm the email AWS sent",
            )
        ]
    return [Result("alarms", topic, Status.WARN, "no subscription: nobody hears the alarms", subscribe)]


# What each dead-letter queue holds, by the stack output that names it (the local stack has one).
DEAD_LETTERS = {
    "ChangesDeadLetterQueueUrl": (
        "dead-letter queue",
        "change(s) or verification(s) that failed every receive, or failed run(s)",
        "tagpin redrive (moves changes and verifications back, lists and clears failed runs)",
    ),
    "EventsDeadLetterQueueUrl": (
        "undelivered events",
        "schedule(s) or ECR event(s) EventBridge could not deliver (a removed permission or function?)",
        "redeploy the stack (sam deploy), then purge the queue; the next scheduled run repeats the work",
    ),
}


def check_dead_letters(seat: Seat) -> list[Result]:
    from tagpin import wiring

    outputs = seat.stack.outputs
    queues = [(outputs[k], *v) for k, v in DEAD_LETTERS.items() if outputs.get(k)] or [
        (seat.stack.dead_letter_queue_url, *DEAD_LETTERS["ChangesDeadLetterQueueUrl"])
    ]
    results = []
    for url, subject, what, fix in queues:
        attributes = wiring.aws("sqs").get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        count = int(attributes.get("ApproximateNumberOfMessages", 0))
        if count:
            results.append(
                Result(
                    "dead letters",
                    subject,
                    Status.WARN,
                    f"{count} {what}",
                    f"find the cause (docs/troubleshooting.md), then: {fix}",
                )
            )
        else:
            results.append(Result("dead letters", subject, Status.OK, "empty"))
    return results


# -- running and rendering -------------------------------------------------------------------------
def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"


def checks() -> list[tuple[str, Check, bool]]:
    """(name, check, needs the configuration), in order."""
    from tagpin_cli.doctor_clusters import check_clusters

    return [
        ("stack", check_stack, False),
        ("functions", check_functions, False),
        ("configuration", check_configuration, False),
        ("secret", check_secrets, True),
        ("registry", check_registries, True),
        ("cluster", check_clusters, True),
        ("webhook", check_webhook, False),
        ("console", check_console, False),
        ("alarms", check_alarms, False),
        ("dead letters", check_dead_letters, False),
    ]


def run(stack: Stack, only: Iterable[str] | None = None) -> Report:
    seat = Seat(stack)
    results: list[Result] = []
    wanted = set(only) if only else None
    stack_failed = False
    for name, check, needs_config in checks():
        if wanted is not None and name not in wanted and name != "configuration":
            continue
        if stack_failed and name != "stack":
            results.append(Result(name, "-", Status.SKIP, "needs the stack"))
            continue
        if needs_config and seat.config is None:
            results.append(Result(name, "-", Status.SKIP, "needs a valid configuration"))
            continue
        try:
            found = check(seat)
        except Exception as exc:  # a check that cannot run is a failure, never a traceback
            found = [Result(name, "-", Status.FAIL, f"could not check: {_short(exc)}", "run again with -v")]
        results.extend(found)
        stack_failed = stack_failed or (name == "stack" and any(r.status is Status.FAIL for r in found))
    return Report(stack.name, stack.local, results)


def not_found(message: str, local: bool) -> Report:
    fix = "start it: tagpin local" if local else "give --stack NAME and --region, or set TAGPIN_STACK"
    results = [Result("stack", "-", Status.FAIL, message, fix)]
    results += [Result(name, "-", Status.SKIP, "needs the stack") for name, _, _ in checks()[1:]]
    return Report("local" if local else "?", local, results, missing_stack=True)


_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def render(report: Report, console: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"tagpin doctor: {'local stack' if report.local else report.stack}", show_lines=True)
    for column in ("check", "subject", "status", "detail", "what to fix"):
        table.add_column(column, overflow="fold")
    for r in report.results:
        table.add_row(
            r.check,
            Text(r.subject),
            Text(r.status.value, style=_STYLE[r.status]),
            Text(r.detail),
            Text(r.fix),
        )
    console.print(table)
    summary = ", ".join(f"{report.count(s)} {s.value}" for s in Status)
    console.print(f"{summary}: " + ("all checks passed" if report.exit_code() == 0 else "see what to fix"))
