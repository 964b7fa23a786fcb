"""No command ever prints a secret, error paths included: a stack that holds one of each kind (the
console's token and session key, the webhook token, the cluster's bearer token in its kubeconfig
secret, a registry password, notification webhook URLs and a Slack signing secret, a signature
gate's key) runs every command as a process, as it should and with each secret broken in the way
that makes a parser or a client quote it (a kubeconfig that is not YAML on the token's line, a
registry secret that is not JSON around the password, a wrong password, a torn endpoints file),
with -v and -vv too. Every output (exit code, stdout, stderr) is collected and searched for every
secret the stack holds or held."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest
import yaml
from tagpin_local.cosign import Signer
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.registry_server import RegistryServer, write_htpasswd
from tagpin_local.stack import LocalStack, StackOptions, cluster_secret

from tests.conftest import require_binary
from tests.support.cli import (
    Cli,
    Ran,
    assert_no_secret,
    document,
    endpoints_file,
    failure,
    printed,
    stack_secrets,
)
from tests.support.stack import drain, own_queues

pytestmark = pytest.mark.e2e

PASSWORD = secrets.token_urlsafe(24)
HOOK = f"http://127.0.0.1:9/services/{secrets.token_urlsafe(24)}"  # a closed port: nothing is sent
SIGNING = secrets.token_urlsafe(24)
REGISTRY_SECRET, NOTIFY_SECRET, KEY_SECRET = (
    "tagpin/registries/private",
    "tagpin/notifications/team",
    "tagpin/signing/team",
)
TARGET = "local/default/Deployment/app/app"


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """A registry that wants Basic credentials (the password lives in the stack's secret store)."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    auth = write_htpasswd(tmp_path_factory.mktemp("htpasswd") / "htpasswd", {"robot": PASSWORD})
    with RegistryServer(auth=auth) as registry:
        yield registry


@pytest.fixture(scope="module")
def st(private: RegistryServer) -> Iterator[LocalStack]:
    image = f"{private.host}/team/app:stable"
    with LocalStack(StackOptions(notifications=False, poll_interval=None, consume=False)) as stack:
        stack.kube.create(deployment("app", "default", image, container="app"))
        assert stack.registry is not None
        web = f"{stack.registry.host}/demo/web:stable"
        stack.kube.create(deployment("web", "default", web, container="web"))
        stack.put_secret(REGISTRY_SECRET, json.dumps({"username": "robot", "password": PASSWORD}))
        stack.put_secret(NOTIFY_SECRET, json.dumps({"slack": HOOK, "slack_signing_secret": SIGNING}))
        stack.put_secret(KEY_SECRET, Signer.generate().public_pem)
        write_config(stack, private)
        yield stack


def write_config(st: LocalStack, private: RegistryServer) -> None:
    document = st.config_document()
    document["registries"][private.host] = {"insecure": True, "credentials_secret": REGISTRY_SECRET}
    target = {"cluster": "local", "namespace": "default", "name": "app", "container": "app"}
    gate = {"mode": "warn", "keys": [{"secret": KEY_SECRET}]}
    document["images"].append(
        {"image": f"{private.host}/team/app:stable", "signatures": gate, "targets": [target]}
    )
    document["rollout"] = {"notifications": {"webhooks_secret": NOTIFY_SECRET}}
    st.write_config(document)


@pytest.fixture(scope="module")
def cli(st: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    return Cli(st, endpoints_file(st, tmp_path_factory.mktemp("cli") / "endpoints.json"))


def every(cli: Cli, private: str, *extra: str) -> list[Ran]:
    """Each command that reads the stack, with ``extra`` options; side by side (they change nothing)."""
    assert cli.st.registry is not None
    commands = (
        ["status"],
        ["--json", "status", "--exit-code"],
        ["history"],
        ["--json", "plan"],
        ["plan"],
        ["--json", "resolve", f"{cli.st.registry.host}/demo/web:stable"],
        ["--json", "resolve", private],
        ["--json", "doctor"],
        ["doctor"],
    )
    return cli.many(*([*extra, *argv] for argv in commands))


def test_no_command_prints_a_secret_as_it_should_or_when_a_secret_is_broken(st, cli, private, tmp_path):
    image = f"{private.host}/team/app:stable"
    push_image(private.url, "team/app", "stable", auth=("robot", PASSWORD))
    push_image(st.registry.url, "demo/web", "stable")
    st.run_poller()
    drain(st)
    held = set(stack_secrets(st))
    assert {PASSWORD, HOOK, SIGNING, st.console_token, st.kube.token} <= held

    # as it should: every command, its usual forms and the decisions on a target
    runs = every(cli, image)
    by_argv = {r.argv[2:]: r for r in runs}
    resolved = document(by_argv[("--json", "resolve", image)])
    assert resolved["auth"] == "basic credentials"
    assert document(by_argv[("--json", "doctor")])["ok"] is True
    assert printed(cli("hold", TARGET)) == f"{TARGET}: held\n"
    assert printed(cli("release", TARGET)).startswith(f"{TARGET}: released")
    queue, dead_letters = own_queues(st)
    redrive = endpoints_file(st, tmp_path / "e.json", queue_url=queue, dead_letter_queue_url=dead_letters)
    assert document(cli("--json", "redrive", endpoints=redrive))["moved"] == 0
    good = tmp_path / "config.yaml"
    good.write_text(st.client("ssm").get_parameter(Name="/tagpin/config")["Parameter"]["Value"])
    runs += cli.many(["config", "validate", str(good)], ["--json", "config", "push", str(good)])
    runs += cli.many(["-vv", "--json", "plan"], ["-vv", "--json", "resolve", image], ["-vv", "doctor"])

    # a wrong password: the registry refuses it; neither resolve, plan nor doctor quotes it
    wrong = secrets.token_urlsafe(24)
    st.put_secret(REGISTRY_SECRET, json.dumps({"username": "robot", "password": wrong}))
    cli.extra.add(wrong)
    refused, *others = cli.many(
        ["--json", "resolve", image], ["-v", "--json", "resolve", image], ["-v", "plan"], ["-v", "doctor"]
    )
    assert "AuthError" in failure(refused, 1)
    runs += [refused, *others]

    # a registry secret that is not JSON, the password beside the break
    st.put_secret(REGISTRY_SECRET, '{"username": "robot", "password": "' + PASSWORD + '" "oops"}')
    torn, *others = cli.many(["--json", "doctor"], ["--json", "resolve", image], ["plan"])
    (check,) = [c for c in document(torn, 1)["checks"] if c["subject"] == REGISTRY_SECRET]
    assert check["status"] == "fail" and "unusable" in check["detail"]
    runs += [torn, *others]
    st.put_secret(REGISTRY_SECRET, json.dumps({"username": "robot", "password": PASSWORD}))

    # a kubeconfig secret that is not YAML on the line with the bearer token
    kubeconfig = yaml.safe_dump(st.kube.kubeconfig("local")).replace(
        f"token: {st.kube.token}", f"token: [{st.kube.token}"
    )
    st.put_secret(cluster_secret("local"), kubeconfig)
    try:
        doctor, plan, *others = cli.many(
            ["--json", "doctor"], ["--json", "plan"], ["-vv", "plan"], ["-vv", "doctor"], ["status"]
        )
        (check,) = [c for c in document(doctor, 1)["checks"] if c["subject"] == cluster_secret("local")]
        assert check["status"] == "fail" and "not valid YAML at line" in check["detail"]
        rows = document(plan)
        assert {r["action"] for r in rows} == {"skip"} and all(
            "unusable credentials" in r["detail"] for r in rows
        )
        runs += [doctor, plan, *others]
    finally:
        st.put_secret(cluster_secret("local"), yaml.safe_dump(st.kube.kubeconfig("local")))

    # the endpoints file torn, or missing what it needs: exit 3, the file named, its secrets not
    whole = json.loads(cli.endpoints.read_text())
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(whole)[:-40])
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({k: v for k, v in whole.items() if k != "queue_url"}))
    for path, said in ((broken, "is not an endpoints file"), (missing, "queue_url")):
        for argv in (["status"], ["--json", "plan"], ["hold", TARGET], ["local", "push", "demo/web:stable"]):
            ran = cli(*argv, endpoints=path)
            assert said in failure(ran, 3), str(ran)
            runs.append(ran)

    # everything printed, against everything the stack holds or held
    everything = stack_secrets(st, (PASSWORD, HOOK, SIGNING, wrong, *held))
    assert len(cli.runs) >= 30 and all(ran in cli.runs for ran in runs)
    for ran in cli.runs:
        assert_no_secret(ran, everything)


def test_the_endpoints_file_keeps_its_secrets_out_of_every_message(st, tmp_path):
    """What the CLI reads the endpoints file into: no repr, str or error shows a secret."""
    from pydantic import ValidationError
    from tagpin_cli import environment
    from tagpin_local.endpoints import LocalEndpoints

    path = endpoints_file(st, tmp_path / "endpoints.json")
    saved = environment.read_local(path)
    stack = environment.local(path)
    secret_words = (st.console_token, st.kube.token)
    for shown in (repr(saved), str(saved), repr(stack), str(stack), json.dumps(saved.public())):
        assert not any(word in shown for word in secret_words)
    assert saved.revealed()["console_token"] == st.console_token  # the file itself keeps it
    with pytest.raises(ValidationError) as raised:
        LocalEndpoints.model_validate(json.loads(path.read_text()) | {"queue_url": 1})
    assert not any(word in str(raised.value) for word in secret_words)
