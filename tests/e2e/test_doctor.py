"""`tagpin doctor` against the local stack: a healthy stack passes; a cluster down, a wrong registry
password, a removed RBAC permission, a missing webhook secret and an unsubscribed alarm topic are
each named, with what to fix, and fail the exit code; Slack's approval buttons, once set up, are
checked against the console's real route. Every test runs alone."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from tagpin_cli import environment
from tagpin_cli.main import main
from tagpin_local.oci import push_image
from tagpin_local.registry_server import write_htpasswd
from tagpin_local.stack import WEBHOOK_SECRET

from tests.conftest import require_binary

pytestmark = pytest.mark.e2e

REGISTRY_SECRET = "tagpin/registries/local"


@pytest.fixture(scope="module")
def endpoints(stack, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("doctor") / "endpoints.json"
    environment.write_local(stack.endpoints(), path)
    return path


@pytest.fixture
def healthy(stack) -> Iterator[None]:
    """The tag exists; every test leaves the stack as it found it."""
    push_image(stack.registry.url, "demo/web", "stable")
    yield
    stack.kube.set_down(False)
    stack.kube.restore_rbac()  # exactly docs/rbac.yaml


def doctor(capsys, endpoints: Path, *extra: str) -> tuple[int, dict]:
    code = main(["doctor", "--local", "--endpoints", str(endpoints), "--json", *extra])
    captured = capsys.readouterr()
    assert captured.err == ""
    return code, json.loads(captured.out)


def checks(report: dict, check: str) -> dict[str, dict]:
    return {c["subject"]: c for c in report["checks"] if c["check"] == check}


def test_a_healthy_stack_passes(stack, endpoints, healthy, capsys):
    code, report = doctor(capsys, endpoints)
    assert code == 0 and report["ok"] is True and report["local"] is True
    statuses = {(c["check"], c["subject"]): c["status"] for c in report["checks"]}
    host = stack.registry.host
    assert statuses == {
        ("stack", "local"): "ok",
        ("functions", "all"): "skip",  # in-process locally
        ("lambda", "consumer"): "skip",  # the local runtime models Lambda's loop guard itself
        ("configuration", "/tagpin/config"): "ok",
        ("secret", "tagpin/webhook"): "ok",
        ("secret", "tagpin/clusters/local"): "ok",
        ("registry", host): "ok",
        ("cluster", "local"): "ok",
        ("permissions", "local: consumer"): "ok",
        ("permissions", "local: reconciler"): "ok",
        ("gitops", "-"): "ok",  # no followed workload is Argo CD's or Flux's
        ("webhook", stack.webhook_url + "/distribution"): "ok",
        ("console", stack.console_url): "ok",
        ("slack", "-"): "skip",  # no Slack signing secret: no approval buttons
        ("alarms", stack.alarm_topic_arn): "ok",
        ("dead letters", "dead-letter queue"): "ok",
    }
    assert "not checked locally" in checks(report, "secret")["tagpin/clusters/local"]["detail"]
    assert "HEAD demo/web:stable anonymously" in checks(report, "registry")[host]["detail"]
    assert "401" in checks(report, "webhook")[stack.webhook_url + "/distribution"]["detail"]
    # Read-only: the unauthenticated POST enqueued nothing, and nothing was patched.
    assert stack.consume_once(wait_s=0) == 0

    assert main(["doctor", "--local", "--endpoints", str(endpoints)]) == 0  # the table
    out = capsys.readouterr().out
    assert "tagpin doctor" in out and "all checks passed" in out


def test_a_cluster_down_fails_naming_it(stack, endpoints, healthy, capsys):
    stack.kube.set_down(True)
    code, report = doctor(capsys, endpoints)
    assert code == 1 and report["ok"] is False
    cluster = checks(report, "cluster")["local"]
    assert cluster["status"] == "fail" and "unreachable" in cluster["detail"]
    assert "cluster local is up" in cluster["fix"] and "tagpin/clusters/local" in cluster["fix"]
    assert checks(report, "permissions")["local"]["status"] == "skip"
    # Everything else still checked and fine.
    assert checks(report, "registry")[stack.registry.host]["status"] == "ok"
    assert checks(report, "webhook")[stack.webhook_url + "/distribution"]["status"] == "ok"


def test_a_removed_rbac_permission_is_named(stack, endpoints, healthy, capsys, tmp_path):
    """tagpin's ServiceAccount is bound to exactly docs/rbac.yaml: all is well; then a cluster
    administrator takes one rule out of its roles, and the real authorizer answers the access
    reviews, kubectl and the patch itself."""
    code, report = doctor(capsys, endpoints)
    assert code == 0 and {c["status"] for c in checks(report, "permissions").values()} == {"ok"}

    stack.kube.revoke("patch", "deployments")
    code, report = doctor(capsys, endpoints)
    assert code == 1
    found = checks(report, "permissions")
    assert found["local: consumer"]["status"] == "fail"
    assert found["local: consumer"]["detail"] == "missing: patch deployments.apps in namespace default"
    assert "docs/rbac.yaml" in found["local: consumer"]["fix"]
    assert found["local: reconciler"]["status"] == "ok"

    stack.kube.revoke("list", "pods")
    code, report = doctor(capsys, endpoints)
    assert (
        checks(report, "permissions")["local: reconciler"]["detail"] == "missing: list pods in all namespaces"
    )

    # The API server enforces what it answers: kubectl (as tagpin) hears the same, and a patch is refused.
    kubectl = require_binary("kubectl")
    kubeconfig = stack.kube.write_kubeconfig(tmp_path / "kubeconfig", context="local")

    def kube(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "c"), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def can_i(*args: str) -> str:
        return kube("auth", "can-i", *args).stdout.strip()

    assert can_i("patch", "deployments", "-n", "default") == "no"
    assert can_i("get", "deployments", "-n", "default") == "yes"
    assert can_i("patch", "statefulsets.apps", "-n", "default") == "yes"
    assert can_i("delete", "deployments", "-n", "default") == "no"
    refused = kube(
        "patch", "deployment", "web", "-n", "default", "-p", '{"metadata": {"labels": {"x": "y"}}}'
    )
    assert refused.returncode != 0 and 'cannot patch resource "deployments"' in refused.stderr
    assert "x" not in stack.kube.get("Deployment", "default", "web")["metadata"].get("labels", {})


def test_a_wrong_registry_password_fails_the_registry(stack, endpoints, healthy, capsys, tmp_path):
    """The registry asks for Basic credentials; the configuration names a secret with them."""
    auth = write_htpasswd(tmp_path / "htpasswd", {"robot": "right-password"})
    document = stack.config_document()
    document["registries"][stack.registry.host]["credentials_secret"] = REGISTRY_SECRET
    stack.put_secret(REGISTRY_SECRET, json.dumps({"username": "robot", "password": "x"}))
    stack.registry.reconfigure(None, auth=auth)
    try:
        push_image(stack.registry.url, "demo/web", "stable", auth=("robot", "right-password"))
        stack.write_config(document)
        code, report = doctor(capsys, endpoints)
        registry = checks(report, "registry")[stack.registry.host]
        assert code == 1 and registry["status"] == "fail"
        assert registry["detail"].startswith("credentials refused")
        assert REGISTRY_SECRET in registry["fix"] and "tagpin resolve" in registry["fix"]
        assert "x" not in registry["detail"].split()  # never the password

        stack.put_secret(REGISTRY_SECRET, json.dumps({"username": "robot", "password": "right-password"}))
        code, report = doctor(capsys, endpoints)
        registry = checks(report, "registry")[stack.registry.host]
        assert code == 0 and registry["status"] == "ok" and "with credentials" in registry["detail"]

        stack.put_secret(REGISTRY_SECRET, json.dumps({"user": "robot"}))
        code, report = doctor(capsys, endpoints)
        secret = checks(report, "secret")[REGISTRY_SECRET]
        assert code == 1 and secret["status"] == "fail" and "unusable" in secret["detail"]
    finally:
        stack.registry.reconfigure(None, auth=None)
        stack.write_config()
        stack.delete_secret(REGISTRY_SECRET)


def test_a_missing_webhook_secret_fails_the_secret_and_the_webhook(stack, endpoints, healthy, capsys):
    value = stack.secret_value(WEBHOOK_SECRET)
    stack.delete_secret(WEBHOOK_SECRET)
    try:
        code, report = doctor(capsys, endpoints)
        assert code == 1
        secret = checks(report, "secret")[WEBHOOK_SECRET]
        assert secret["status"] == "fail" and "does not exist" in secret["detail"]
        # the default store: the SecureString parameter "/" + the secret's name
        assert "does not exist" in secret["detail"] and "/tagpin/webhook" in secret["detail"]
        assert "aws ssm put-parameter --type SecureString --name /tagpin/webhook" in secret["fix"]
        (webhook,) = checks(report, "webhook").values()
        assert webhook["status"] == "fail" and "503" in webhook["detail"]
    finally:
        stack.put_secret(WEBHOOK_SECRET, value)
        from tagpin import wiring

        wiring.reset()  # the webhook function's cached "not configured"


def test_an_unsubscribed_alarm_topic_warns(stack, endpoints, healthy, capsys):
    sns = stack.client("sns")
    (subscription,) = sns.list_subscriptions_by_topic(TopicArn=stack.alarm_topic_arn)["Subscriptions"]
    sns.unsubscribe(SubscriptionArn=subscription["SubscriptionArn"])
    try:
        code, report = doctor(capsys, endpoints)
        alarms = checks(report, "alarms")[stack.alarm_topic_arn]
        assert code == 0 and alarms["status"] == "warn" and "nobody hears the alarms" in alarms["detail"]
        assert "AlarmEmail" in alarms["fix"]
        assert doctor(capsys, endpoints, "--strict")[0] == 1  # --strict: a warning fails too
    finally:
        sns.subscribe(TopicArn=stack.alarm_topic_arn, Protocol="sqs", Endpoint=subscription["Endpoint"])


def test_an_invalid_configuration_fails_and_skips_what_needs_it(stack, endpoints, healthy, capsys):
    stack.client("ssm").put_parameter(
        Name="/tagpin/config",
        Value=yaml.safe_dump({"images": [{"image": "x"}]}),
        Type="String",
        Overwrite=True,
    )
    try:
        code, report = doctor(capsys, endpoints)
    finally:
        stack.write_config()
    assert code == 1
    (config,) = checks(report, "configuration").values()
    assert config["status"] == "fail" and "tagpin config push" in config["fix"]
    for name in ("secret", "registry", "cluster"):
        assert [c["status"] for c in report["checks"] if c["check"] == name] == ["skip"]


def test_no_local_stack_is_exit_3(tmp_path, capsys):
    code = main(["doctor", "--local", "--endpoints", str(tmp_path / "none.json"), "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 3 and captured.err == "" and report["ok"] is False
    (stack,) = checks(report, "stack").values()
    assert stack["status"] == "fail" and "tagpin local" in stack["fix"]


def test_slack_approval_buttons_reach_the_console(stack, endpoints, healthy, capsys):
    """With a Slack signing secret the doctor POSTs to the console's /slack/actions unsigned: the
    console refuses it (401) before reading anything, which shows that Slack's clicks arrive."""
    name = "tagpin/notifications/doctor"
    document = stack.config_document()
    document.setdefault("rollout", {})["notifications"] = {"webhooks_secret": name}
    stack.put_secret(name, json.dumps({"slack_signing_secret": "s1gning"}))
    try:
        stack.write_config(document)
        code, report = doctor(capsys, endpoints)
        slack = checks(report, "slack")[stack.console_url.removesuffix("/console") + "/slack/actions"]
        assert code == 0 and slack["status"] == "ok" and "answered 401" in slack["detail"]
        assert "s1gning" not in json.dumps(report)
    finally:
        stack.write_config()
        stack.delete_secret(name)
