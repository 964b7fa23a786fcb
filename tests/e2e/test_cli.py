"""The tagpin CLI against the local stack: every command, its output and its exit code."""

from __future__ import annotations

import json
import time

import pytest
from tagpin_cli import environment
from tagpin_cli.main import main
from tagpin_local.oci import push_image

from tests.support.constants import STATE_TABLE
from tests.support.stack import drain

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def endpoints(stack, tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "endpoints.json"
    environment.write_local(stack.endpoints(), path)
    return path


LAST_ERR: list[str] = []


def run(capsys, endpoints, *args: str) -> tuple[int, object]:
    code = main(["--local", str(endpoints), "--json", *args])
    captured = capsys.readouterr()
    LAST_ERR[:] = [captured.err]
    return code, (json.loads(captured.out) if captured.out.strip() else None)


def settle(stack) -> None:
    stack.run_poller()
    drain(stack)


def test_status_history_and_exit_codes(stack, endpoints, capsys):
    digest = push_image(stack.registry.url, "demo/web", "stable")
    settle(stack)
    code, rows = run(capsys, endpoints, "status", "--exit-code")
    assert code == 0
    (row,) = rows
    assert row["image"] == f"{stack.registry.host}/demo/web:stable" and row["digest"] == digest
    assert row["targets"][0]["condition"] == "current"

    newer = push_image(stack.registry.url, "demo/web", "stable")
    stack.run_poller()  # enqueued, not yet applied: the target is behind
    code, rows = run(capsys, endpoints, "status", "--exit-code")
    assert (
        code == 4
        and rows[0]["digest"] == newer
        and rows[0]["targets"][0]["condition"] in ("behind", "pending")
    )
    drain(stack)

    code, events = run(capsys, endpoints, "history", f"{stack.registry.host}/demo/web:stable")
    assert code == 0
    assert [e["digest"] for e in events[:2]] == [newer, digest]
    assert {e["status"] for e in events[:2]} == {"applied"} and events[0]["trigger"] == "poll"
    assert run(capsys, endpoints, "history", "nosuch/target")[0] == 2


def test_plan_is_a_dry_run(stack, endpoints, capsys):
    settle(stack)
    before = stack.kube.get("Deployment", "default", "web")["spec"]["template"]["spec"]["containers"][0][
        "image"
    ]
    patches = stack.kube.count("PATCH")
    code, rows = run(capsys, endpoints, "plan")
    assert code == 0 and rows[0]["action"] == "none"
    digest = push_image(stack.registry.url, "demo/web", "stable")
    code, rows = run(capsys, endpoints, "plan")
    assert code == 4
    assert (
        rows[0]["action"] == "roll" and rows[0]["to"].endswith("@" + digest) and rows[0]["current"] == before
    )
    # Nothing changed: no patch, no state write, nothing enqueued.
    assert stack.kube.count("PATCH") == patches
    tag = stack.client("dynamodb").get_item(
        TableName=STATE_TABLE,
        Key={"pk": {"S": f"TAG#{stack.registry.host}/demo/web:stable"}, "sk": {"S": "STATE"}},
    )["Item"]
    assert tag["digest"]["S"] != digest
    assert stack.consume_once(wait_s=0) == 0


def test_resolve(stack, endpoints, capsys):
    digest = push_image(stack.registry.url, "demo/web", "stable")
    code, result = run(capsys, endpoints, "resolve", f"{stack.registry.host}/demo/web:stable")
    assert code == 0
    assert result["digest"] == digest and result["method"] == "HEAD" and result["auth"] == "anonymous"


def test_config_validate_and_push(stack, endpoints, capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "clusters: {}\nimages: [{image: nginx, targets: [{cluster: nowhere, name: w, container: w}]}]\n"
    )
    assert run(capsys, endpoints, "config", "validate", str(bad))[0] == 2
    assert "images.0.targets.0.cluster: unknown cluster 'nowhere'" in LAST_ERR[0]
    good = tmp_path / "good.yaml"
    document = stack.config_document()
    document["images"][0]["targets"][0]["namespace"] = "team"
    import yaml

    good.write_text(yaml.safe_dump(document))
    code, result = run(capsys, endpoints, "config", "push", str(good))
    try:
        assert code == 0 and result["pushed"] is True and result["targets"] == 1
        stored = stack.client("ssm").get_parameter(Name="/tagpin/config")["Parameter"]["Value"]
        assert "team" in stored
        # An invalid document is never pushed.
        assert run(capsys, endpoints, "config", "push", str(bad))[0] == 2
        assert "team" in stack.client("ssm").get_parameter(Name="/tagpin/config")["Parameter"]["Value"]
    finally:
        stack.write_config()


def test_redrive_moves_dead_letters_back(stack, endpoints, capsys):
    sqs = stack.client("sqs")
    body = json.dumps(
        {"image": "x", "digest": "y", "observed_at": int(time.time() * 1000), "trigger": "poll"}
    )
    sqs.send_message(
        QueueUrl=stack.dlq_url, MessageBody=body, MessageGroupId="grp", MessageDeduplicationId="d1"
    )
    code, result = run(capsys, endpoints, "redrive")
    assert code == 0 and result["moved"] == 1
    (message,) = sqs.receive_message(
        QueueUrl=stack.queue_url, MessageSystemAttributeNames=["MessageGroupId"], WaitTimeSeconds=1
    )["Messages"]
    assert message["Body"] == body and message["Attributes"]["MessageGroupId"] == "grp"
    sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"])
    assert sqs.receive_message(QueueUrl=stack.dlq_url, WaitTimeSeconds=0).get("Messages", []) == []


def test_missing_local_stack_is_exit_3(tmp_path, capsys):
    assert main(["--local", str(tmp_path / "none.json"), "status"]) == 3
    assert "tagpin local" in capsys.readouterr().err
