"""Static checks of template.yaml that cfn-lint does not make for SAM resources.

cfn-lint E3505 (visibility timeout vs function timeout) fires on raw CloudFormation but
not on a SAM ``Events: SQS`` source, so the invariants tagpin relies on are asserted here
on the template as written (Globals resolved the way SAM resolves them).

Every ``AWS::Serverless::Function`` of the template is checked (``test_every_function``), enumerated
from the template itself, so a new function is checked without editing this file: its name in
``tagpin.settings.NEEDS``, runtime, handler and code, architecture, timeout against its triggers, SQS
sources, memory, layers, its environment against ``tagpin.settings.NEEDS``, its IAM statements (SAM
policy templates expanded) and their agreement with its environment, cluster and registry access,
its output. Each check returns the problems it found, so that ``test_the_checks_catch`` shows on
broken copies of the template that each of them fails when it should.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
from tagpin.domain import config
from tagpin.domain.redelivery import RECEIVES
from tagpin.settings import CONFIG, NEEDS, PREFIX, SecretStore, Settings, variable

from tests.unit.template_support import (
    FUNCTIONS,
    ROOT,
    TEMPLATE,
    UNSCOPABLE_ACTIONS,
    actions_of,
    as_list,
    evaluate,
    evaluated_statements,
    events_of_type,
    function_props,
    policy_statements,
    references,
    resources,
    rule_enabled,
    settings_key,
    statements_for,
    template,  # noqa: F401 (the module fixture)
)

Template = dict[str, Any]

PRODUCERS = ("PollerFunction", "WebhookFunction")

RUNTIME = "python3.13"
HANDLER = "app.lambda_handler"
TIMEOUT_RANGE = (3, 900)  # Lambda allows 1..900 s; under 3 s a cold start alone may not fit
MEMORY_RANGE = (128, 10240)  # Lambda's limits, MB
KUBERNETES_MIN_MEMORY = 512  # more memory = more CPU: the kubernetes client import dominates the cold start
VISIBILITY_FACTOR = 6  # AWS: an SQS source queue's VisibilityTimeout >= 6 x the function's timeout
HTTP_API_MAX_TIMEOUT = 30  # seconds an HTTP API waits for its integration, at most
COMMON_LAYER = {"Ref": "CommonLayer"}
KUBERNETES_LAYER = {"Ref": "KubernetesLayer"}
GIT_LAYER = {"Ref": "GitLayer"}
# The function that writes to Git (docs/gitops.md): the only one with the Git client's layer and
# the Git tokens (tagpin/git/...).
GIT_FUNCTIONS = frozenset({"writeback"})
# The functions that talk to clusters: the only ones that get the kubernetes client layer, EKS
# permissions, the cluster roles of other accounts and an EKS access entry.
KUBERNETES_FUNCTIONS = frozenset({"consumer", "reconciler"})
# The functions that read registries: they resolve tags (their handlers build tagpin.wiring.detector()),
# or read a digest's manifest, blobs and signatures for the trust gates (the consumer); the only ones
# that get ECR tokens and manifests and the registry roles of other accounts.
REGISTRY_FUNCTIONS = frozenset({"poller", "webhook", "reconciler", "consumer"})
EKS_CLUSTERS = {"Fn::Sub": "arn:${AWS::Partition}:eks:*:${AWS::AccountId}:cluster/*"}
ECR_REPOSITORIES = {"Fn::Sub": "arn:${AWS::Partition}:ecr:*:${AWS::AccountId}:repository/*"}
REGISTRY_ROLES = {"Ref": "RegistryRoleArns"}  # registries.<host>.ecr.role_arn: only the roles given
# The functions that notify rollout events (SNS and the webhooks of rollout.notifications).
# the reconciler: a hold; the console: a person's decision on an approval (and Slack's signing secret)
NOTIFYING_FUNCTIONS = frozenset({"consumer", "reconciler", "console"})
# The function that checks signatures before a patch (its keys, tagpin/signing/...; docs/trust.md).
SIGNATURE_FUNCTIONS = frozenset({"consumer"})
# The functions that read no secret at all (none since the console announces decisions).
SECRETLESS_FUNCTIONS: frozenset[str] = frozenset()


SECRET_ARN = "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:"
PARAMETER_ARN = "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/"
# The stores of template parameter SecretStore, each with the action that reads a secret there.
SECRET_STORES = {"ssm": "ssm:GetParameter", "secretsmanager": "secretsmanager:GetSecretValue"}


def secrets_under(prefix: str) -> dict[str, str]:
    """The ARNs of the secrets named ``prefix``... (the configuration's convention, per kind)."""
    return {"Fn::Sub": f"{SECRET_ARN}{prefix}*"}


def parameters_under(prefix: str) -> dict[str, str]:
    """The ARNs of the SecureString parameters ``/prefix``... (SecretStore=ssm)."""
    return {"Fn::Sub": f"{PARAMETER_ARN}{prefix}*"}


REGISTRY_SECRETS = secrets_under(config.REGISTRY_SECRETS)
CLUSTER_SECRETS = secrets_under(config.CLUSTER_SECRETS)
NOTIFICATION_SECRETS = secrets_under(config.NOTIFICATION_SECRETS)
SIGNING_SECRETS = secrets_under(config.SIGNING_SECRETS)
GIT_SECRETS = secrets_under(config.GIT_SECRETS)
# The webhook's own secret (parameter WebhookSecretName); Secrets Manager appends "-" + 6 characters.
WEBHOOK_SECRET = {"Fn::Sub": SECRET_ARN + "${WebhookSecretName}-??????"}
# The same secrets in SSM: the parameter "/" + the name.
REGISTRY_PARAMETERS = parameters_under(config.REGISTRY_SECRETS)
CLUSTER_PARAMETERS = parameters_under(config.CLUSTER_SECRETS)
NOTIFICATION_PARAMETERS = parameters_under(config.NOTIFICATION_SECRETS)
SIGNING_PARAMETERS = parameters_under(config.SIGNING_SECRETS)
GIT_PARAMETERS = parameters_under(config.GIT_SECRETS)
WEBHOOK_PARAMETER = {"Fn::Sub": PARAMETER_ARN + "${WebhookSecretName}"}
CONFIG_PARAMETER = {
    "Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${ConfigParameterName}"
}
KMS_KEY = "arn:aws:kms:eu-west-1:111122223333:key/00000000-0000-0000-0000-000000000000"
CLUSTER_ROLE = "arn:aws:iam::111122223333:role/tagpin-deployer"

# The one value of each TAGPIN_* variable, whichever function carries it.
VARIABLE_VALUES: dict[str, Any] = {
    "TAGPIN_CONFIG_PARAMETER": {"Ref": "ConfigParameterName"},
    "TAGPIN_STATE_TABLE": {"Ref": "StateTable"},
    "TAGPIN_IDEMPOTENCY_TABLE": {"Ref": "IdempotencyTable"},
    "TAGPIN_QUEUE_URL": {"Ref": "ChangesQueue"},
    "TAGPIN_NOTIFICATIONS_QUEUE_URL": {"Ref": "NotificationsQueue"},
    "TAGPIN_NOTIFY_TOPIC_ARN": {"Ref": "RolloutTopic"},
    "TAGPIN_WEBHOOK_SECRET": {"Ref": "WebhookSecretName"},
    "TAGPIN_RECONCILE_RESOLVES": {"Fn::If": ["PollingEnabled", "false", "true"]},
    "TAGPIN_SECRET_STORE": {"Ref": "SecretStore"},
    "TAGPIN_POLL_PARTS": {"Ref": "PollParts"},
    "TAGPIN_DEAD_LETTER_QUEUE_URL": {"Ref": "ChangesDeadLetterQueue"},
    "TAGPIN_WRITEBACK_QUEUE_URL": {"Ref": "WriteBackQueue"},
}
# A function that carries a variable only when a condition holds (the resource it names is conditional).
CONDITIONAL_VALUES: dict[tuple[str, str], Any] = {
    ("consumer", "TAGPIN_WRITEBACK_QUEUE_URL"): {
        "Fn::If": ["WriteBackEnabled", {"Ref": "WriteBackQueue"}, {"Ref": "AWS::NoValue"}]
    },
}
# Variables that carry a setting, not a resource (no statement grants on them).
SETTINGS_ONLY = frozenset({"TAGPIN_RECONCILE_RESOLVES", "TAGPIN_POLL_PARTS"})
# Besides its TAGPIN_* variables a function carries these and POWERTOOLS_SERVICE_NAME, nothing else.
POWERTOOLS_VARIABLES: dict[str, Any] = {
    "POWERTOOLS_METRICS_NAMESPACE": "tagpin",
    "POWERTOOLS_LOG_LEVEL": {"Ref": "LogLevel"},
    # Custom metrics are opt-in (DetailedMonitoring): disabled unless asked for.
    "POWERTOOLS_METRICS_DISABLED": {"Fn::If": ["Detailed", "false", "true"]},
}


# --------------------------------------------------------------------------- per-function checks
def _key(tpl: Template, fn: str) -> str:
    key = settings_key(function_props(tpl, fn))
    if key is None:
        pytest.fail(f"{fn}: a new function must be added to tagpin.settings.NEEDS")
    return key


def needed_variables(key: str) -> set[str]:
    """The TAGPIN_* variables a function needs, per tagpin.settings.NEEDS (config: the SSM parameter)."""
    return {variable("config_parameter") if name == CONFIG else variable(name) for name in NEEDS[key]}


def identity_problems(tpl: Template, fn: str) -> list[str]:
    """It maps to tagpin.settings.NEEDS: POWERTOOLS_SERVICE_NAME and CodeUri both name it."""
    props = function_props(tpl, fn)
    key = settings_key(props)
    service = props.get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME")
    if key is None:
        return [
            f"{fn}: neither POWERTOOLS_SERVICE_NAME ({service!r}) nor CodeUri ({props.get('CodeUri')!r}) "
            "names a function of tagpin.settings.NEEDS: a new function must be added to tagpin.settings.NEEDS"
        ]
    problems = []
    if service != key:
        problems.append(f"{fn}: POWERTOOLS_SERVICE_NAME is {service!r}, not {key!r}")
    if props.get("CodeUri") != f"functions/{key}/":
        problems.append(f"{fn}: CodeUri is {props.get('CodeUri')!r}, not 'functions/{key}/'")
    return problems


def code_problems(tpl: Template, fn: str) -> list[str]:
    """python3.13, app.lambda_handler, and the handler's code on disk."""
    props = function_props(tpl, fn)
    problems = []
    if props.get("Runtime") != RUNTIME:
        problems.append(f"{fn}: Runtime {props.get('Runtime')!r}, not {RUNTIME}")
    if props.get("Handler") != HANDLER:
        problems.append(f"{fn}: Handler {props.get('Handler')!r}, not {HANDLER}")
    module, _, handler = HANDLER.rpartition(".")
    source = ROOT / str(props.get("CodeUri")) / f"{module}.py"
    if not source.is_file():
        problems.append(f"{fn}: no {source.relative_to(ROOT)}")
    elif f"def {handler}(" not in source.read_text(encoding="utf-8"):
        problems.append(f"{fn}: {source.relative_to(ROOT)} defines no {handler}")
    return problems


def architecture_problems(tpl: Template, fn: str) -> list[str]:
    """One architecture, that every layer of the function is built for and runs on."""
    props = function_props(tpl, fn)
    archs = props.get("Architectures")
    if not (isinstance(archs, list) and len(archs) == 1):
        return [f"{fn}: Architectures {archs!r}: exactly one is expected"]
    (arch,) = archs
    problems = []
    for layer in props.get("Layers", []):
        res = resources(tpl).get(layer.get("Ref") if isinstance(layer, dict) else None)
        if res is None or res["Type"] != "AWS::Serverless::LayerVersion":
            problems.append(f"{fn}: layer {layer!r} is no layer of the template")
            continue
        if arch not in res["Properties"].get("CompatibleArchitectures", []):
            problems.append(f"{fn}: {arch} is not among {layer['Ref']}'s CompatibleArchitectures")
        if res.get("Metadata", {}).get("BuildArchitecture", arch) != arch:
            problems.append(f"{fn}: {layer['Ref']} is built for {res['Metadata']['BuildArchitecture']}")
        if props.get("Runtime") not in res["Properties"].get("CompatibleRuntimes", []):
            problems.append(f"{fn}: {props.get('Runtime')} is not among {layer['Ref']}'s CompatibleRuntimes")
    return problems


def _rate_seconds(expression: str) -> int | None:
    match = re.fullmatch(r"rate\((\d+) (minute|hour|day)s?\)", expression)
    if match is None:
        return None
    return int(match.group(1)) * {"minute": 60, "hour": 3600, "day": 86400}[match.group(2)]


def timeout_problems(tpl: Template, fn: str) -> list[str]:
    """Within bounds, and consistent with every trigger: an SQS source's visibility timeout covers six
    runs, an HTTP API waits as long as the function may run, a default schedule's runs do not overlap."""
    props = function_props(tpl, fn)
    timeout = props.get("Timeout")
    low, high = TIMEOUT_RANGE
    if not (isinstance(timeout, int) and low <= timeout <= high):
        return [f"{fn}: Timeout {timeout!r} is not within {low}..{high} s"]
    problems = []
    for event in events_of_type(props, "SQS"):
        queue = _source_queue(tpl, event)
        if queue is None:
            problems.append(f"{fn}: SQS source {event.get('Queue')!r} is no queue of the template")
            continue
        visibility = queue["Properties"].get("VisibilityTimeout", 30)  # the SQS default
        if visibility < VISIBILITY_FACTOR * timeout:
            name = event["Queue"]["Fn::GetAtt"][0]
            problems.append(
                f"{fn}: {name}.VisibilityTimeout {visibility} < {VISIBILITY_FACTOR} x Timeout {timeout}"
            )
    for event in events_of_type(props, "HttpApi"):
        if timeout > HTTP_API_MAX_TIMEOUT:
            problems.append(f"{fn}: Timeout {timeout} s: an HTTP API waits {HTTP_API_MAX_TIMEOUT} s at most")
        waits = event.get("TimeoutInMillis", HTTP_API_MAX_TIMEOUT * 1000)
        if not timeout * 1000 <= waits <= HTTP_API_MAX_TIMEOUT * 1000:
            problems.append(f"{fn}: the HTTP API waits {waits} ms for a function that may run {timeout} s")
    for event in events_of_type(props, "Schedule"):
        period = _rate_seconds(str(evaluate(tpl, event["Schedule"], {})))
        if period is not None and timeout > period:
            problems.append(f"{fn}: Timeout {timeout} s is longer than its default schedule ({period} s)")
    return problems


def _source_queue(tpl: Template, event: dict[str, Any]) -> dict[str, Any] | None:
    arn = event.get("Queue")
    if not (isinstance(arn, dict) and set(arn) == {"Fn::GetAtt"} and arn["Fn::GetAtt"][1] == "Arn"):
        return None
    queue = resources(tpl).get(arn["Fn::GetAtt"][0])
    return queue if queue is not None and queue["Type"] == "AWS::SQS::Queue" else None


def sqs_source_problems(tpl: Template, fn: str) -> list[str]:
    """Every SQS source: partial batch failures, a dead-letter queue, FIFO limits, concurrency >= 2."""
    problems = []
    for event in events_of_type(function_props(tpl, fn), "SQS"):
        queue = _source_queue(tpl, event)
        if queue is None:
            problems.append(f"{fn}: SQS source {event.get('Queue')!r} is no queue of the template")
            continue
        name = event["Queue"]["Fn::GetAtt"][0]
        if event.get("FunctionResponseTypes") != ["ReportBatchItemFailures"]:
            problems.append(f"{fn}: the {name} source does not report batch item failures")
        if "RedrivePolicy" not in queue["Properties"]:
            problems.append(f"{fn}: {name} has no dead-letter queue (RedrivePolicy)")
        if queue["Properties"].get("FifoQueue") is True:
            if event.get("BatchSize", 10) > 10:
                problems.append(f"{fn}: BatchSize {event['BatchSize']} > 10, the FIFO maximum")
            if "MaximumBatchingWindowInSeconds" in event:
                problems.append(f"{fn}: MaximumBatchingWindowInSeconds is not allowed on the FIFO {name}")
        concurrency = event.get("ScalingConfig", {}).get("MaximumConcurrency")
        if concurrency is not None and int(evaluate(tpl, concurrency, {})) < 2:
            problems.append(f"{fn}: ScalingConfig.MaximumConcurrency below 2 (the SQS minimum)")
    return problems


def memory_problems(tpl: Template, fn: str) -> list[str]:
    """Set, within Lambda's limits, and enough for the kubernetes client where it is loaded."""
    props = function_props(tpl, fn)
    memory = props.get("MemorySize")
    low, high = MEMORY_RANGE
    if not (isinstance(memory, int) and low <= memory <= high):
        return [f"{fn}: MemorySize {memory!r} is not within {low}..{high} MB"]
    if KUBERNETES_LAYER in props.get("Layers", []) and memory < KUBERNETES_MIN_MEMORY:
        return [f"{fn}: MemorySize {memory} MB with the kubernetes layer (at least {KUBERNETES_MIN_MEMORY})"]
    return []


def layer_problems(tpl: Template, fn: str) -> list[str]:
    """The common layer for all; then the kubernetes layer for the functions that talk to clusters only."""
    key = _key(tpl, fn)
    layers = function_props(tpl, fn).get("Layers")
    # order matters: the kubernetes layer relies on pydantic & co. from the common layer
    expected = [COMMON_LAYER, KUBERNETES_LAYER] if key in KUBERNETES_FUNCTIONS else [COMMON_LAYER]
    if key in GIT_FUNCTIONS:
        expected = [COMMON_LAYER, GIT_LAYER]
    return [] if layers == expected else [f"{fn}: Layers {layers!r}, not {expected!r}"]


def environment_problems(tpl: Template, fn: str) -> list[str]:
    """Every TAGPIN_* variable tagpin.settings.NEEDS names for it, with its value, and no other; the
    powertools variables; nothing else."""
    key = _key(tpl, fn)
    env = function_props(tpl, fn).get("Environment", {}).get("Variables", {})
    needed = needed_variables(key)
    carried = {name for name in env if name.startswith(PREFIX)}
    problems = [f"{fn}: {name} is missing ({key} needs it)" for name in sorted(needed - carried)]
    problems += [
        f"{fn}: {name} is set but the {key} function does not need it" for name in sorted(carried - needed)
    ]
    for name in sorted(carried & needed):
        if name not in VARIABLE_VALUES:
            problems.append(
                f"{fn}: no expected value for {name} in VARIABLE_VALUES (tests/unit/test_template.py)"
            )
        elif env[name] != (value := CONDITIONAL_VALUES.get((key, name), VARIABLE_VALUES[name])):
            problems.append(f"{fn}: {name} is {env[name]!r}, not {value!r}")
    expected = POWERTOOLS_VARIABLES | {"POWERTOOLS_SERVICE_NAME": key}
    for name, value in expected.items():
        if env.get(name) != value:
            problems.append(f"{fn}: {name} is {env.get(name)!r}, not {value!r}")
    problems += [f"{fn}: unexpected variable {name}" for name in sorted(set(env) - carried - set(expected))]
    return problems


def iam_problems(tpl: Template, fn: str) -> list[str]:
    """No Action "*" or "service:*", no NotAction/NotResource, Resource "*" only for the actions that
    cannot be scoped; the configuration parameter read by its own ARN, decrypted with KmsKeyArn only
    when one is given."""
    props = function_props(tpl, fn)
    try:
        statements = policy_statements(props)
    except AssertionError as exc:
        return [f"{fn}: {exc}"]
    problems = []
    for stmt in statements:
        if "NotAction" in stmt or "NotResource" in stmt:
            problems.append(f"{fn}: NotAction/NotResource grant everything else: {stmt}")
        actions = as_list(stmt.get("Action", []))
        wild = [a for a in actions if a == "*" or str(a).endswith(":*")]
        if wild:
            problems.append(f"{fn}: wildcard action {wild} in {stmt}")
        scopable = set(actions) - UNSCOPABLE_ACTIONS
        if "*" in as_list(stmt.get("Resource", [])) and scopable:
            problems.append(f"{fn}: Resource '*' for {sorted(scopable)}, which can name a resource")
    if CONFIG in NEEDS.get(settings_key(props) or "", ()):
        # ssm:GetParameter: the config parameter by its own ARN, in a statement of its own; besides it
        # only the secrets' parameters (SecretStore=ssm; which ones: secret_problems)
        reads = statements_for(props, "ssm:GetParameter")
        config_reads = [s for s in reads if CONFIG_PARAMETER in as_list(s["Resource"])]
        if len(config_reads) != 1 or as_list(config_reads[0]["Resource"]) != [CONFIG_PARAMETER]:
            problems.append(f"{fn}: ssm:GetParameter is not granted on the config parameter alone: {reads}")
        others = [r for s in reads if s not in config_reads for r in as_list(s["Resource"])]
        problems += [
            f"{fn}: ssm:GetParameter on {r}, neither the configuration nor a secret"
            for r in others
            if not (isinstance(r, dict) and str(r.get("Fn::Sub", "")).startswith(PARAMETER_ARN))
        ]
        # the configuration (and secrets) may be encrypted with KmsKeyArn: decrypt with it, only when given
        if any("kms:Decrypt" in as_list(s["Action"]) for s in evaluated_statements(tpl, props, {})):
            problems.append(f"{fn}: kms:Decrypt is granted without a KmsKeyArn")
        with_key = evaluated_statements(tpl, props, {"KmsKeyArn": KMS_KEY})
        if not any(_grants_on(s, "kms:Decrypt", KMS_KEY) for s in with_key):
            problems.append(f"{fn}: reads the configuration but gets no kms:Decrypt on KmsKeyArn")
    return problems


def _grants_on(stmt: dict[str, Any], action: str, resource: Any) -> bool:
    return (
        stmt.get("Effect") == "Allow"
        and action in as_list(stmt["Action"])
        and resource in as_list(stmt["Resource"])
    )


def cluster_problems(tpl: Template, fn: str) -> list[str]:
    """The functions that talk to clusters, and only they: EKS clusters of the account, the cluster
    roles of other accounts (only when ClusterRoleArns is given), an EKS access entry."""
    key = _key(tpl, fn)
    props = function_props(tpl, fn)
    talks = key in KUBERNETES_FUNCTIONS
    roles = evaluated_statements(tpl, props, {"ClusterRoleArns": CLUSTER_ROLE})
    role = f"{fn}Role"
    found = {
        "eks:DescribeCluster on the account's clusters": any(
            _grants_on(s, "eks:DescribeCluster", EKS_CLUSTERS) for s in policy_statements(props)
        ),
        "sts:AssumeRole on ClusterRoleArns": any(
            _grants_on(s, "sts:AssumeRole", CLUSTER_ROLE) for s in roles
        ),
        "EKS access entry": any(
            r["Type"] == "AWS::EKS::AccessEntry"
            and r["Properties"]["PrincipalArn"] == {"Fn::GetAtt": [role, "Arn"]}
            for r in resources(tpl).values()
        ),
    }
    problems = []
    for what, present in found.items():
        if talks and not present:
            problems.append(f"{fn}: talks to clusters but has no {what}")
        if present and not talks:
            problems.append(f"{fn}: {what}, but {key} does not talk to clusters")
    # ClusterRoleArns left empty evaluates to [""]: no statement may then grant on it
    default = evaluated_statements(tpl, props, {})
    if any(_grants_on(s, "sts:AssumeRole", "") for s in default):
        problems.append(f"{fn}: sts:AssumeRole is granted without ClusterRoleArns")
    if not talks and any(a.startswith("eks:") for a in actions_of(props)):
        problems.append(f"{fn}: EKS permissions, but {key} does not talk to clusters")
    return problems


def registry_problems(tpl: Template, fn: str) -> list[str]:
    """The functions that resolve tags at registries, and only they: ECR tokens, ECR manifests of the
    account, the registry roles of other accounts; registry credentials under tagpin/."""
    key = _key(tpl, fn)
    statements = policy_statements(function_props(tpl, fn))
    resolves = key in REGISTRY_FUNCTIONS
    needed = [
        ("ecr:GetAuthorizationToken", "*"),
        ("ecr:BatchGetImage", ECR_REPOSITORIES),
        ("sts:AssumeRole", REGISTRY_ROLES),
    ]
    problems = []
    for action, resource in needed:
        granted = any(_grants_on(s, action, resource) for s in statements)
        if resolves and not granted:
            problems.append(f"{fn}: resolves tags at registries but gets no {action} on {resource}")
        if not resolves and granted:
            problems.append(f"{fn}: {action} on {resource}, but {key} does not resolve tags at registries")
    for store, read in SECRET_STORES.items():
        where = REGISTRY_PARAMETERS if store == "ssm" else REGISTRY_SECRETS
        granted = evaluated_statements(tpl, function_props(tpl, fn), {"SecretStore": store})
        if resolves and not any(_grants_on(s, read, where) for s in granted):
            problems.append(
                f"{fn}: resolves tags at registries but cannot read their credentials "
                f"({config.REGISTRY_SECRETS}*) with SecretStore={store}"
            )
    if not resolves and any(a.startswith("ecr:") for s in statements for a in as_list(s["Action"])):
        problems.append(f"{fn}: ECR permissions, but {key} does not resolve tags at registries")
    return problems


def secret_problems(tpl: Template, fn: str) -> list[str]:
    """Exactly the secrets it reads, in the store SecretStore names and in no other: registry
    credentials where tags are resolved, cluster credentials where clusters are reached, notification
    webhooks where rollouts are notified, the webhook's own secret in the webhook (the configuration
    checks that each secret it names is under its kind's prefix). With ``ssm`` they are SecureString
    parameters ``/<name>`` (``ssm:GetParameter``), with ``secretsmanager`` secrets
    (``secretsmanager:GetSecretValue``); the configuration parameter is no secret (iam_problems)."""
    key = _key(tpl, fn)
    props = function_props(tpl, fn)
    kinds = []
    if key in REGISTRY_FUNCTIONS:
        kinds.append((REGISTRY_PARAMETERS, REGISTRY_SECRETS))
    if key in KUBERNETES_FUNCTIONS:
        kinds.append((CLUSTER_PARAMETERS, CLUSTER_SECRETS))
    if key in NOTIFYING_FUNCTIONS:
        kinds.append((NOTIFICATION_PARAMETERS, NOTIFICATION_SECRETS))
    if key in SIGNATURE_FUNCTIONS:
        kinds.append((SIGNING_PARAMETERS, SIGNING_SECRETS))
    if key in GIT_FUNCTIONS:
        kinds.append((GIT_PARAMETERS, GIT_SECRETS))
    if variable("webhook_secret") in props.get("Environment", {}).get("Variables", {}):
        kinds.append((WEBHOOK_PARAMETER, WEBHOOK_SECRET))
    problems = []
    for store in SECRET_STORES:
        # a secret in the other store counts as one it may read but does not
        statements = evaluated_statements(tpl, props, {"SecretStore": store})
        wanted = [parameter if store == "ssm" else secret for parameter, secret in kinds]
        granted = [
            r
            for s in statements
            if s.get("Effect") == "Allow"
            for r in as_list(s["Resource"])
            if any(a in as_list(s["Action"]) for a in SECRET_STORES.values()) and r != CONFIG_PARAMETER
        ]
        problems += [
            f"{fn}: may read the secrets {r}, which {key} does not read (SecretStore={store})"
            for r in granted
            if r not in wanted
        ]
        problems += [
            f"{fn}: cannot read the secrets {w}, which {key} reads (SecretStore={store})"
            for w in wanted
            if w not in granted
        ]
    return problems


def access_problems(tpl: Template, fn: str) -> list[str]:
    """Its IAM and its environment agree: each resource a TAGPIN_* variable names is granted, and
    no resource behind a TAGPIN_* variable is granted without the variable."""
    props = function_props(tpl, fn)
    env = props.get("Environment", {}).get("Variables", {})
    granted = {name for s in policy_statements(props) if s.get("Effect") == "Allow" for name in references(s)}
    # A parameter with AllowedValues is a choice (SecretStore), not the name of a resource.
    choices = {name for name, p in tpl.get("Parameters", {}).items() if "AllowedValues" in p}
    problems = []
    behind: dict[str, str] = {}
    for name, value in VARIABLE_VALUES.items():
        for ref in references(value) if name not in SETTINGS_ONLY else ():
            behind[ref] = name
    for name, value in env.items():
        if name.startswith(PREFIX) and name not in SETTINGS_ONLY:
            problems += [
                f"{fn}: {name} names {ref}, but no statement grants on it"
                for ref in references(value) - granted - choices
            ]
    for ref in sorted(granted & behind.keys()):
        if behind[ref] not in env:
            problems.append(f"{fn}: granted on {ref} without {behind[ref]} (it cannot find it)")
    return problems


def output_problems(tpl: Template, fn: str) -> list[str]:
    output = tpl.get("Outputs", {}).get(f"{fn}Name", {})
    return [] if output.get("Value") == {"Ref": fn} else [f"{fn}: no output {fn}Name (its function name)"]


CHECKS: dict[str, Callable[[Template, str], list[str]]] = {
    "identity": identity_problems,
    "code": code_problems,
    "architecture": architecture_problems,
    "timeout": timeout_problems,
    "sqs_sources": sqs_source_problems,
    "memory": memory_problems,
    "layers": layer_problems,
    "environment": environment_problems,
    "iam": iam_problems,
    "access": access_problems,
    "clusters": cluster_problems,
    "registries": registry_problems,
    "secrets": secret_problems,
    "output": output_problems,
}

# Gaps of template.yaml the checks found and that are not fixed yet: (check, function) -> the gap.
# strict: the test fails as soon as the gap is closed, so that the entry is removed with the fix.
KNOWN_GAPS: dict[tuple[str, str], str] = {}  # (check, function) -> reason: strict xfail until fixed


def _every_function_params() -> list[Any]:
    params = []
    for fn in FUNCTIONS:
        for check in CHECKS:
            gap = KNOWN_GAPS.get((check, fn))
            marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
            params.append(pytest.param(fn, check, id=f"{fn}-{check}", marks=marks))
    return params


@pytest.mark.parametrize(("fn", "check"), _every_function_params())
def test_every_function(template: Template, fn: str, check: str) -> None:  # noqa: F811
    assert CHECKS[check](template, fn) == []


def test_every_function_of_the_settings_is_deployed_once(template: Template) -> None:  # noqa: F811
    keys = [settings_key(function_props(template, fn)) for fn in FUNCTIONS]
    assert sorted(k for k in keys if k) == sorted(NEEDS)


def test_one_architecture_for_all_functions(template: Template) -> None:  # noqa: F811
    archs = {tuple(function_props(template, fn)["Architectures"]) for fn in FUNCTIONS}
    # arm64: the layer Makefiles install aarch64 wheels (template.yaml, Globals)
    assert archs == {("arm64",)}


def test_needs_name_settings_fields() -> None:
    fields = set(Settings.model_fields) | {CONFIG}
    for key, names in NEEDS.items():
        assert set(names) <= fields, key
    assert set(VARIABLE_VALUES) >= {v for key in NEEDS for v in needed_variables(key)}


# --------------------------------------------------------------------------- the checks can fail
def _props(fn: str) -> Callable[[Template], dict[str, Any]]:
    return lambda t: resources(t)[fn]["Properties"]


def _variables(fn: str) -> Callable[[Template], dict[str, Any]]:
    return lambda t: resources(t)[fn]["Properties"]["Environment"]["Variables"]


def _statements(fn: str) -> Callable[[Template], list[Any]]:
    return lambda t: resources(t)[fn]["Properties"]["Policies"][0]["Statement"]


def _drop_statement(t: Template, fn: str, sid: str) -> None:
    """Remove the statement ``sid``, also when it is the first branch of an Fn::If."""

    def sid_of(stmt: Any) -> Any:
        return sid_of(stmt["Fn::If"][1]) if "Fn::If" in stmt else stmt.get("Sid")

    statements = _statements(fn)(t)
    assert any(sid_of(s) == sid for s in statements), sid
    statements[:] = [s for s in statements if sid_of(s) != sid]


def _branch(t: Template, fn: str, sid: str, store: str) -> dict[str, Any]:
    """The statement ``sid`` of the SecretStore ``store``: a branch of its Fn::If on SecretsInSsm."""
    for stmt in _statements(fn)(t):
        if "Fn::If" in stmt and stmt["Fn::If"][0] == "SecretsInSsm" and stmt["Fn::If"][1].get("Sid") == sid:
            branch: dict[str, Any] = stmt["Fn::If"][1 if store == "ssm" else 2]
            return branch
    raise AssertionError(f"{fn} has no {sid} on SecretsInSsm")


def _new_function(t: Template) -> None:
    janitor = copy.deepcopy(resources(t)["PollerFunction"])
    janitor["Properties"]["CodeUri"] = "functions/janitor/"
    janitor["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] = "janitor"
    resources(t)["JanitorFunction"] = janitor


BREAKAGES: dict[str, tuple[Callable[[Template], Any], str, str, str]] = {
    # name: (break the template, check, function, part of the problem)
    "unknown function": (
        _new_function, "identity", "JanitorFunction", "must be added to tagpin.settings.NEEDS",
    ),
    "missing variable": (
        lambda t: _variables("ConsumerFunction")(t).pop("TAGPIN_NOTIFY_TOPIC_ARN"),
        "environment", "ConsumerFunction", "TAGPIN_NOTIFY_TOPIC_ARN is missing",
    ),
    "extra variable": (
        lambda t: _variables("ReconcilerFunction")(t).update(
            TAGPIN_IDEMPOTENCY_TABLE={"Ref": "IdempotencyTable"}
        ),
        "environment", "ReconcilerFunction", "TAGPIN_IDEMPOTENCY_TABLE is set but",
    ),
    "wrong value": (
        lambda t: _variables("ConsumerFunction")(t).update(
            TAGPIN_QUEUE_URL={"Ref": "ChangesDeadLetterQueue"}
        ),
        "environment", "ConsumerFunction", "TAGPIN_QUEUE_URL is",
    ),
    "resource *": (
        lambda t: _statements("ReconcilerFunction")(t).append(
            {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}
        ),
        "iam", "ReconcilerFunction", "Resource '*' for ['sqs:SendMessage']",
    ),
    "service wildcard": (
        lambda t: _statements("ConsumerFunction")(t).append(
            {"Effect": "Allow", "Action": "sns:*", "Resource": {"Ref": "RolloutTopic"}}
        ),
        "iam", "ConsumerFunction", "wildcard action ['sns:*']",
    ),
    "SAM template with *": (
        lambda t: _props("ReconcilerFunction")(t)["Policies"].append({"EKSDescribePolicy": {}}),
        "iam", "ReconcilerFunction", "Resource '*' for ['eks:DescribeCluster', 'eks:ListClusters']",
    ),
    "managed policy": (
        lambda t: _props("PollerFunction")(t)["Policies"].append("AmazonS3ReadOnlyAccess"),
        "iam", "PollerFunction", "managed policy",
    ),
    "unknown SAM template": (
        lambda t: _props("PollerFunction")(t)["Policies"].append({"S3ReadPolicy": {"BucketName": "b"}}),
        "iam", "PollerFunction", "S3ReadPolicy is not known",
    ),
    "grant without variable": (
        lambda t: _props("ReconcilerFunction")(t)["Policies"].append(
            {"DynamoDBReadPolicy": {"TableName": {"Ref": "IdempotencyTable"}}}
        ),
        "access", "ReconcilerFunction", "granted on IdempotencyTable without TAGPIN_IDEMPOTENCY_TABLE",
    ),
    "variable without grant": (
        lambda t: _drop_statement(t, "ConsumerFunction", "RolloutNotifications"),
        "access", "ConsumerFunction", "TAGPIN_NOTIFY_TOPIC_ARN names RolloutTopic, but no statement",
    ),
    "kubernetes layer on the webhook": (
        lambda t: _props("WebhookFunction")(t)["Layers"].append(KUBERNETES_LAYER),
        "layers", "WebhookFunction", "Layers",
    ),
    "no kubernetes layer on the reconciler": (
        lambda t: _props("ReconcilerFunction")(t)["Layers"].pop(),
        "layers", "ReconcilerFunction", "Layers",
    ),
    "visibility timeout": (
        lambda t: _props("ConsumerFunction")(t).update(Timeout=61),
        "timeout", "ConsumerFunction", "ChangesQueue.VisibilityTimeout 360 < 6 x Timeout 61",
    ),
    "schedule overlap": (
        lambda t: _props("ReconcilerFunction")(t).update(Timeout=900),
        "timeout", "ReconcilerFunction", "longer than its default schedule (600 s)",
    ),
    "http api timeout": (
        lambda t: _props("WebhookFunction")(t).update(Timeout=20),
        "timeout", "WebhookFunction", "waits 15000 ms",
    ),
    "memory": (
        lambda t: _props("ConsumerFunction")(t).update(MemorySize=256),
        "memory", "ConsumerFunction", "with the kubernetes layer",
    ),
    "two architectures": (
        lambda t: t["Globals"]["Function"].update(Architectures=["arm64", "x86_64"]),
        "architecture", "PollerFunction", "exactly one is expected",
    ),
    "function architecture": (
        lambda t: _props("ConsumerFunction")(t).update(Architectures=["x86_64"]),
        "architecture", "ConsumerFunction", "x86_64 is not among CommonLayer's CompatibleArchitectures",
    ),
    "layer architecture": (
        lambda t: resources(t)["KubernetesLayer"]["Properties"].update(CompatibleArchitectures=["x86_64"]),
        "architecture", "ReconcilerFunction", "arm64 is not among KubernetesLayer's CompatibleArchitectures",
    ),
    "no dead-letter queue": (
        lambda t: resources(t)["ChangesQueue"]["Properties"].pop("RedrivePolicy"),
        "sqs_sources", "ConsumerFunction", "ChangesQueue has no dead-letter queue",
    ),
    "runtime": (
        lambda t: _props("ReconcilerFunction")(t).update(Runtime="python3.12"),
        "code", "ReconcilerFunction", "Runtime 'python3.12'",
    ),
    "consumer cannot read ECR for its trust gates": (
        lambda t: _drop_statement(t, "ConsumerFunction", "EcrManifestsAndBlobs"),
        "registries", "ConsumerFunction", "gets no ecr:BatchGetImage",
    ),
    "poller without ECR token": (
        lambda t: _drop_statement(t, "PollerFunction", "EcrToken"),
        "registries", "PollerFunction", "gets no ecr:GetAuthorizationToken",
    ),
    "webhook describes clusters": (
        lambda t: _statements("WebhookFunction")(t).append(
            {"Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": EKS_CLUSTERS}
        ),
        "clusters", "WebhookFunction", "eks:DescribeCluster on the account's clusters, but webhook does not",
    ),
    "consumer without cluster roles": (
        lambda t: _drop_statement(t, "ConsumerFunction", "AssumeClusterRoles"),
        "clusters", "ConsumerFunction", "has no sts:AssumeRole on ClusterRoleArns",
    ),
    "reconciler without access entry": (
        lambda t: resources(t).pop("ReconcilerAccessEntry"),
        "clusters", "ReconcilerFunction", "has no EKS access entry",
    ),
    "cluster roles always": (
        lambda t: _statements("ConsumerFunction")(t).append(
            {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": {"Ref": "ClusterRoleArns"}}
        ),
        "clusters", "ConsumerFunction", "sts:AssumeRole is granted without ClusterRoleArns",
    ),
    "no KMS decrypt": (
        lambda t: _drop_statement(t, "ReconcilerFunction", "DecryptConfigAndSecrets"),
        "iam", "ReconcilerFunction", "no kms:Decrypt on KmsKeyArn",
    ),
    "every secret": (
        lambda t: _statements("PollerFunction")(t).append(
            {
                "Effect": "Allow",
                "Action": "secretsmanager:GetSecretValue",
                "Resource": secrets_under(config.base.SECRET_PREFIX),
            }
        ),
        "secrets", "PollerFunction", "may read the secrets {'Fn::Sub': 'arn:${AWS::Partition}",
    ),
    "webhook reads cluster secrets": (
        lambda t: _statements("WebhookFunction")(t).append(
            {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": CLUSTER_SECRETS}
        ),
        "secrets", "WebhookFunction", "secret:tagpin/clusters/*'}, which webhook does not read",
    ),
    "consumer cannot notify": (
        lambda t: _branch(t, "ConsumerFunction", "ConsumerSecrets", "ssm").update(
            Resource=CLUSTER_PARAMETERS
        ),
        "secrets", "ConsumerFunction",
        "parameter/tagpin/notifications/*'}, which consumer reads (SecretStore=ssm)",
    ),
    "consumer cannot notify with secretsmanager": (
        lambda t: _branch(t, "ConsumerFunction", "ConsumerSecrets", "secretsmanager").update(
            Resource=CLUSTER_SECRETS
        ),
        "secrets", "ConsumerFunction",
        "secret:tagpin/notifications/*'}, which consumer reads (SecretStore=secretsmanager)",
    ),
    "secrets in both stores": (
        lambda t: _statements("PollerFunction")(t).append(
            copy.deepcopy(_branch(t, "PollerFunction", "RegistryCredentials", "ssm"))
        ),
        "secrets", "PollerFunction",
        "parameter/tagpin/registries/*'}, which poller does not read (SecretStore=secretsmanager)",
    ),
    "webhook secret in the wrong store": (
        lambda t: _branch(t, "WebhookFunction", "WebhookSecret", "ssm").update(
            Action="secretsmanager:GetSecretValue", Resource=WEBHOOK_SECRET
        ),
        "secrets", "WebhookFunction",
        "${WebhookSecretName}-??????'}, which webhook does not read (SecretStore=ssm)",
    ),
    "reconciler cannot read registry parameters": (
        lambda t: _branch(t, "ReconcilerFunction", "RegistryAndClusterSecrets", "ssm").update(
            Resource=CLUSTER_PARAMETERS
        ),
        "registries", "ReconcilerFunction",
        "cannot read their credentials (tagpin/registries/*) with SecretStore=ssm",
    ),
    "config and secrets in one statement": (
        lambda t: _branch(t, "ConsumerFunction", "ConsumerSecrets", "ssm")["Resource"].append(
            CONFIG_PARAMETER
        ),
        "iam", "ConsumerFunction", "ssm:GetParameter is not granted on the config parameter alone",
    ),
    "no secret store variable": (
        lambda t: t["Globals"]["Function"]["Environment"]["Variables"].pop("TAGPIN_SECRET_STORE"),
        "environment", "ReconcilerFunction", "TAGPIN_SECRET_STORE is missing",
    ),
    "no output": (
        lambda t: t["Outputs"].pop("ConsumerFunctionName"),
        "output", "ConsumerFunction", "no output ConsumerFunctionName",
    ),
}  # fmt: skip


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_the_checks_catch(template: Template, breakage: str) -> None:  # noqa: F811
    change, check, fn, expected = BREAKAGES[breakage]
    broken = copy.deepcopy(template)
    before = CHECKS[check](broken, fn) if fn in FUNCTIONS else []
    assert not any(expected in p for p in before), before
    change(broken)
    problems = CHECKS[check](broken, fn)
    assert any(expected in p for p in problems), problems


def test_sam_policy_templates_are_expanded() -> None:
    props = {
        "Policies": [{"DynamoDBCrudPolicy": {"TableName": {"Ref": "StateTable"}}}, {"EKSDescribePolicy": {}}]
    }
    crud, eks = policy_statements(props)
    assert crud["Resource"][0] == {
        "Fn::Sub": [
            "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${tableName}",
            {"tableName": {"Ref": "StateTable"}},
        ]
    }
    assert references(crud) == {"StateTable"}
    assert "dynamodb:Scan" in actions_of(props)
    assert eks["Resource"] == "*"


# --------------------------------------------------------------------------- runtime, layers
def test_layers_are_built_with_makefile_for_python313(template: Template) -> None:  # noqa: F811
    for layer, uri in (("CommonLayer", "layers/common/"), ("KubernetesLayer", "layers/kubernetes/")):
        res = resources(template)[layer]
        assert res["Type"] == "AWS::Serverless::LayerVersion"
        assert res["Properties"]["ContentUri"] == uri
        assert res["Properties"]["CompatibleRuntimes"] == ["python3.13"]
        assert res["Metadata"]["BuildMethod"] == "makefile"
        makefile = TEMPLATE.parent / uri / "Makefile"
        text = makefile.read_text(encoding="utf-8")
        assert f"build-{layer}:" in text
        assert "--invalidation-mode unchecked-hash" in text
        assert "python3.13" in text


def test_layers_are_per_function(template: Template) -> None:  # noqa: F811
    assert "Layers" not in template.get("Globals", {}).get("Function", {}), "layers are per function"


def test_timeouts(template: Template) -> None:  # noqa: F811
    assert function_props(template, "PollerFunction")["Timeout"] == 300
    assert function_props(template, "WebhookFunction")["Timeout"] == 15
    assert function_props(template, "ConsumerFunction")["Timeout"] == 60


def test_parameter_defaults(template: Template) -> None:  # noqa: F811
    params = template["Parameters"]
    assert params["ConfigParameterName"]["Default"] == "/tagpin/config"
    assert params["WebhookSecretName"]["Default"] == "tagpin/webhook"
    assert params["SecretStore"]["Default"] == "ssm"
    assert params["PollSchedule"]["Default"] == "rate(5 minutes)"


# --------------------------------------------------------------------------- queue + SQS event
def test_consumer_consumes_the_changes_queue(template: Template) -> None:  # noqa: F811
    (event,) = events_of_type(function_props(template, "ConsumerFunction"), "SQS")
    assert event["Queue"] == {"Fn::GetAtt": ["ChangesQueue", "Arn"]}
    assert event["BatchSize"] == 10  # FIFO maximum
    assert "MaximumConcurrency" in event["ScalingConfig"]


def test_fifo_queue_settings(template: Template) -> None:  # noqa: F811
    queue = resources(template)["ChangesQueue"]
    assert queue["Type"] == "AWS::SQS::Queue"
    props = queue["Properties"]
    assert props["FifoQueue"] is True
    assert props["ContentBasedDeduplication"] is False  # producers set MessageDeduplicationId
    assert props["DeduplicationScope"] == "messageGroup"
    assert props["FifoThroughputLimit"] == "perMessageGroupId"
    assert props.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in props


def test_redrive_to_fifo_dead_letter_queue(template: Template) -> None:  # noqa: F811
    redrive = resources(template)["ChangesQueue"]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["ChangesDeadLetterQueue", "Arn"]}
    assert redrive["maxReceiveCount"] == RECEIVES  # after the handlers' redelivery schedule
    dlq = resources(template)["ChangesDeadLetterQueue"]
    assert dlq["Type"] == "AWS::SQS::Queue"
    props = dlq["Properties"]
    assert props["FifoQueue"] is True  # a FIFO source needs a FIFO DLQ
    assert props["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert props.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in props


# --------------------------------------------------------------------------- schedule
def schedule_event(tpl: Template) -> dict[str, Any]:
    (event,) = events_of_type(function_props(tpl, "PollerFunction"), "Schedule")
    return event


def test_poll_schedule_condition_wiring(template: Template) -> None:  # noqa: F811
    assert template["Conditions"]["PollingEnabled"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "PollSchedule"}, "off"]}]
    }
    event = schedule_event(template)
    state = event.get("State", event.get("Enabled"))
    assert isinstance(state, dict) and state["Fn::If"][0] == "PollingEnabled"


@pytest.mark.parametrize(
    ("schedule", "enabled"),
    [("rate(5 minutes)", True), ("cron(0/10 * * * ? *)", True), ("off", False)],
)
def test_poll_schedule_off_disables_the_rule(template: Template, schedule: str, enabled: bool) -> None:  # noqa: F811
    event = evaluate(template, schedule_event(template), {"PollSchedule": schedule})
    assert rule_enabled(event) is enabled
    # the rule always gets a syntactically valid expression ("off" is not one)
    assert str(event["Schedule"]).startswith(("rate(", "cron("))
    if enabled:
        assert event["Schedule"] == schedule


def test_default_schedule_polls(template: Template) -> None:  # noqa: F811
    event = evaluate(template, schedule_event(template), {})
    assert rule_enabled(event)
    assert event["Schedule"] == "rate(5 minutes)"


# --------------------------------------------------------------------------- webhook
def test_webhook_route(template: Template) -> None:  # noqa: F811
    assert resources(template)["WebhookApi"]["Type"] == "AWS::Serverless::HttpApi"
    (event,) = events_of_type(function_props(template, "WebhookFunction"), "HttpApi")
    assert event["ApiId"] == {"Ref": "WebhookApi"}
    assert event["Method"] == "POST"
    assert event["Path"] == "/webhooks/{source}"


# --------------------------------------------------------------------------- tables
def test_state_table(template: Template) -> None:  # noqa: F811
    props = resources(template)["StateTable"]["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert {"AttributeName": "pk", "AttributeType": "S"} in props["AttributeDefinitions"]
    assert {"AttributeName": "sk", "AttributeType": "S"} in props["AttributeDefinitions"]
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True


def test_idempotency_table_has_ttl(template: Template) -> None:  # noqa: F811
    props = resources(template)["IdempotencyTable"]["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": "id", "AttributeType": "S"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}


# --------------------------------------------------------------------------- IAM
def test_the_secret_store_is_a_choice_of_two(template: Template) -> None:  # noqa: F811
    """SecretStore: ssm (SecureString parameters, free: the default) or secretsmanager; every function
    is told which (TAGPIN_SECRET_STORE, tagpin.settings.SecretStore) and the condition follows it."""
    param = template["Parameters"]["SecretStore"]
    assert param["Default"] == "ssm" and param["AllowedValues"] == list(SECRET_STORES)
    assert sorted(param["AllowedValues"]) == sorted(s.value for s in SecretStore)
    assert template["Conditions"]["SecretsInSsm"] == {"Fn::Equals": [{"Ref": "SecretStore"}, "ssm"]}
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["TAGPIN_SECRET_STORE"] == {"Ref": "SecretStore"}


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_secret_statements_follow_the_secret_store(template: Template, fn: str) -> None:  # noqa: F811
    """Each statement that grants secrets is an Fn::If on SecretsInSsm: ssm:GetParameter on the
    parameters /tagpin/<kind>/* when SecretStore=ssm, secretsmanager:GetSecretValue on the secrets
    tagpin/<kind>/* otherwise, the same kinds either way; nothing of the other store is granted."""
    raw = resources(template)[fn]["Properties"]["Policies"][0]["Statement"]
    choices = [s["Fn::If"] for s in raw if "Fn::If" in s and s["Fn::If"][0] == "SecretsInSsm"]
    if settings_key(function_props(template, fn)) in SECRETLESS_FUNCTIONS:
        assert not choices, f"{fn} reads no secret: it gets none"
        assert not statements_for(function_props(template, fn), "secretsmanager:GetSecretValue"), fn
        return
    assert choices, f"{fn} reads secrets: its statements choose the store"
    for _, ssm, secretsmanager in choices:
        assert ssm["Sid"] == secretsmanager["Sid"]
        assert ssm["Action"] == "ssm:GetParameter"
        assert secretsmanager["Action"] == "secretsmanager:GetSecretValue"
        parameters = [str(r["Fn::Sub"]).removeprefix(PARAMETER_ARN) for r in as_list(ssm["Resource"])]
        secrets = [
            str(r["Fn::Sub"]).removeprefix(SECRET_ARN).removesuffix("-??????")
            for r in as_list(secretsmanager["Resource"])
        ]
        assert parameters == secrets, ssm["Sid"]  # one name per secret: "/" + name in SSM
    # no secret statement outside a choice
    for stmt in raw:
        if "Fn::If" not in stmt:
            assert "secretsmanager:GetSecretValue" not in as_list(stmt["Action"]), stmt
            if "ssm:GetParameter" in as_list(stmt["Action"]):
                assert stmt["Resource"] == CONFIG_PARAMETER, stmt
    props = function_props(template, fn)
    for store, read in SECRET_STORES.items():
        granted = evaluated_statements(template, props, {"SecretStore": store})
        actions = {a for s in granted for a in as_list(s["Action"])}
        assert read in actions, (fn, store)
        if store == "ssm":
            assert not {a for a in actions if a.startswith("secretsmanager:")}, fn
        else:
            reads = [
                r
                for s in granted
                if "ssm:GetParameter" in as_list(s["Action"])
                for r in as_list(s["Resource"])
            ]
            assert reads == [CONFIG_PARAMETER], fn


def test_producer_permissions(template: Template) -> None:  # noqa: F811
    for fn in PRODUCERS:
        props = function_props(template, fn)
        actions = actions_of(props)
        assert {
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "sqs:SendMessage",
            "ssm:GetParameter",
            "secretsmanager:GetSecretValue",
        } <= actions, fn
        # producers never delete, never touch clusters or the idempotency table; they consume
        # only the webhook's own notifications queue (what its HTTP path queued)
        own = [{"Fn::GetAtt": ["NotificationsQueue", "Arn"]}] if fn == "WebhookFunction" else []
        assert not {a for a in actions if a.startswith("eks:")}, fn
        assert "dynamodb:DeleteItem" not in actions, fn
        assert [s["Resource"] for s in statements_for(props, "sqs:ReceiveMessage")] == own, fn
        for stmt in statements_for(props, "dynamodb:PutItem"):
            assert stmt["Resource"] == {"Fn::GetAtt": ["StateTable", "Arn"]}, fn
        sent_to = [s["Resource"] for s in statements_for(props, "sqs:SendMessage")]
        assert sent_to == [{"Fn::GetAtt": ["ChangesQueue", "Arn"]}, *own], fn
    webhook = function_props(template, "WebhookFunction")
    secrets = [str(s["Resource"]) for s in statements_for(webhook, "secretsmanager:GetSecretValue")]
    assert any("${WebhookSecretName}" in r for r in secrets)


def test_consumer_permissions(template: Template) -> None:  # noqa: F811
    props = function_props(template, "ConsumerFunction")
    actions = actions_of(props)
    assert {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "ssm:GetParameter",
        "secretsmanager:GetSecretValue",
        "eks:DescribeCluster",
    } <= actions
    # sends only delayed verifications and a promotion's next wave, on the changes queue, and (with
    # GitWriteBack) write requests to the write-back queue
    send, writes = statements_for(props, "sqs:SendMessage")
    assert send["Resource"] == {"Fn::GetAtt": ["ChangesQueue", "Arn"]}
    assert writes["Resource"] == {"Fn::GetAtt": ["WriteBackQueue", "Arn"]}
    (stmt,) = [s for s in props["Policies"][0]["Statement"] if "Fn::If" in s and writes in s["Fn::If"]]
    assert evaluate(template, stmt, {}) == {"Ref": "AWS::NoValue"}  # GitWriteBack=disabled: none
    # cross-account clusters: only the role ARNs given as a parameter, only when given
    (assume,) = [s for s in statements_for(props, "sts:AssumeRole") if s["Resource"] != REGISTRY_ROLES]
    assert assume["Resource"] == {"Ref": "ClusterRoleArns"}
    (stmt,) = [s for s in props["Policies"][0]["Statement"] if "Fn::If" in s and assume in s["Fn::If"]]
    assert stmt["Fn::If"][0] == "HasClusterRoles"
    assert evaluate(template, stmt, {"ClusterRoleArns": ""}) == {"Ref": "AWS::NoValue"}
    role = "arn:aws:iam::111122223333:role/tagpin-deployer"
    assert evaluate(template, stmt, {"ClusterRoleArns": role})["Resource"] == [role]
    (eks,) = statements_for(props, "eks:DescribeCluster")
    assert eks["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:eks:*:${AWS::AccountId}:cluster/*"}
    # signature gates' KMS keys: their public half, only on the key ARNs given, only when given
    (public,) = statements_for(props, "kms:GetPublicKey")
    assert public["Resource"] == {"Ref": "SigningKmsKeyArns"} and as_list(public["Action"]) == [
        "kms:GetPublicKey"
    ]
    (stmt,) = [s for s in props["Policies"][0]["Statement"] if "Fn::If" in s and public in s["Fn::If"]]
    assert stmt["Fn::If"][0] == "HasSigningKmsKeys"
    assert evaluate(template, stmt, {"SigningKmsKeyArns": ""}) == {"Ref": "AWS::NoValue"}
    others = [f for f in ("PollerFunction", "WebhookFunction", "ReconcilerFunction")]
    assert not [f for f in others if "kms:GetPublicKey" in actions_of(function_props(template, f))]
    idem_arn = {"Fn::GetAtt": ["IdempotencyTable", "Arn"]}
    idem = [s for s in policy_statements(props) if s["Resource"] == idem_arn]
    # powertools: a conditional put returns the existing record (no GetItem); delete after a failure
    assert idem and {a for s in idem for a in as_list(s["Action"])} == {
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    }


def test_config_parameter_name_has_a_leading_slash(template: Template) -> None:  # noqa: F811
    # the ARN ...:parameter${ConfigParameterName} (iam check) is only right for names with a leading slash
    assert template["Parameters"]["ConfigParameterName"]["AllowedPattern"].startswith("^/")


# --------------------------------------------------------------------------- outputs
def test_outputs(template: Template) -> None:  # noqa: F811
    outputs = template["Outputs"]
    for name in ("WebhookUrl", "ChangesQueueUrl", "StateTableName", "IdempotencyTableName"):
        assert name in outputs
