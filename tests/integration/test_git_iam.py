"""IAM of the Git write-back proven from what the code calls (tests/support/iam.py), as
tests/integration/test_iam.py proves the other functions': the real consumer and write-back
handlers on the local stack with ``GitWriteBack=enabled``, once per secret store, the Git token a
secret encrypted with a customer KMS key (``KmsKeyArn`` set). Every call is allowed by its
function's role in template.yaml, every statement of the write-back function's role is used by a
call, and the consumer's grant on the write-back queue is used too. Driven through a commit (the
token read, the claims read and finished, the verifications sent), a refused token (the request
made visible again later: ChangeMessageVisibility) and a record that is no request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin import wiring
from tagpin_local.gitserver import GitServer
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.iam import Call
from tests.support.iamplatform import platform_calls
from tests.support.iamroles import denied, role, unused
from tests.support.iamsession import RECORDER
from tests.support.stack import drain, wait_for

pytestmark = pytest.mark.integration

TOKEN = "ghp_iam_0123456789abcdef"
SECRET = "tagpin/git/local"
KUSTOMIZATION = "apps/web/kustomization.yaml"


class World:
    def __init__(self, st: LocalStack, git: GitServer, key: str) -> None:
        self.st, self.git, self.key = st, git, key

    @property
    def parameters(self) -> dict[str, str]:
        return {"GitWriteBack": "enabled", "KmsKeyArn": self.key, "SecretStore": self.st.options.secret_store}


@pytest.fixture(scope="module", params=["ssm", "secretsmanager"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    require_binary("git-http-backend", "/usr/lib/git-core/git-http-backend")
    options = StackOptions(
        notifications=False, consume=False, git_write_back=True, secret_store=request.param, rollout_delay=0.2
    )
    with GitServer(tokens={TOKEN: "write"}) as git, LocalStack(options) as st:
        key = st.client("kms").create_key(Description="tagpin secrets")["KeyMetadata"]["Arn"]
        yield World(st, git, key)


def scenario(w: World) -> None:
    st, git = w.st, w.git
    assert st.registry is not None
    image = f"{st.registry.host}/demo/web:stable"
    first = push_image(st.registry.url, "demo/web", "stable", content=b"first")
    kustomization = f"images:\n  - name: web\n    newName: {st.registry.host}/demo/web\n    newTag: stable\n"
    url = git.create("org/apps", {KUSTOMIZATION: kustomization + f"    digest: {first}\n"})
    st.kube.create(
        deployment("web", "default", f"{image}@{first}", "web", labels={"app.kubernetes.io/instance": "web"})
    )
    config = st.config_document()
    config["gitops"] = {
        "hosts": {git.host: {"credentials_secret": SECRET, "insecure": True}},
        "write_back": [
            {"image": image, "repository": url, "files": [{"path": KUSTOMIZATION, "kind": "kustomize"}]}
        ],
    }
    st.write_config(config)
    st.put_secret(SECRET, json.dumps({"token": TOKEN}), key=w.key)
    # a push: the consumer sends the write request, the write-back function commits it
    push_image(st.registry.url, "demo/web", "stable", content=b"second")
    st.run_poller()
    drain(st)
    wiring.reset()  # the write-back function's container is its own: it reads the configuration too
    wait_for("the commit", lambda: st.write_once(wait_s=0) >= 0 and len(git.log("org/apps")) == 2)
    # a refused token: the request comes back later (its visibility set by the function)
    st.put_secret(SECRET, json.dumps({"token": "ghp_refused_0123456789"}), key=w.key)
    wiring.reset()  # a container started since
    push_image(st.registry.url, "demo/web", "stable", content=b"third")
    st.run_poller()
    drain(st)
    wait_for("the refused request", lambda: st.write_once(wait_s=0) > 0)
    # a record that is no request: straight back, on its way to the dead-letter queue
    st.client("sqs").send_message(
        QueueUrl=st.writeback_url, MessageBody="junk", MessageGroupId="junk", MessageDeduplicationId="junk"
    )
    wait_for("the junk record", lambda: st.write_once(wait_s=1) > 0)


@pytest.fixture(scope="module")
def calls(world: World) -> list[Call]:
    with RECORDER.capture() as sink:
        scenario(world)
    assert not sink.unattributed, f"production calls made outside any invocation: {sink.unattributed}"
    environment = dict(next(c for c in sink.calls if c.function == "writeback").environment)
    platform = platform_calls("writeback", environment, world.parameters)
    return sink.calls + platform


def test_every_call_is_allowed_by_its_functions_role(world: World, calls: list[Call]) -> None:
    assert {"consumer", "writeback"} <= {c.function for c in calls}
    assert denied(calls, world.parameters) == []


def test_every_statement_of_the_write_back_role_is_used_by_a_call(world: World, calls: list[Call]) -> None:
    problems = unused(calls, ["writeback"], world.parameters)
    assert problems == [], "\n".join(problems)


def test_the_consumer_sends_write_requests_and_never_reads_a_git_token(
    world: World, calls: list[Call]
) -> None:
    consumer = [c for c in calls if c.function == "consumer"]
    sent = {r.resource for c in consumer for r in c.requests if r.action == "sqs:SendMessage"}
    assert any(resource.endswith(":tagpin-writeback.fifo") for resource in sent)
    reads = {
        r.resource
        for c in calls
        for r in c.requests
        if r.action in ("ssm:GetParameter", "secretsmanager:GetSecretValue") and "tagpin/git/" in r.resource
    }
    assert reads and {c.function for c in calls for r in c.requests if r.resource in reads} == {"writeback"}
    granted: Any = role("consumer", dict(consumer[0].environment), world.parameters)
    assert not any("tagpin/git/" in str(g.statement.get("Resource")) for g in granted.statements)
