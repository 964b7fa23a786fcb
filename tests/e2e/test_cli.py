"""The tagpin CLI against the local stack: every command, its output and its exit code.

Every test sets up what it needs (images pushed, state settled) and runs alone:
``pytest tests/e2e/test_cli.py::<name>``. The functions run in this process; their logs and
metrics go to ``lambda_runtime.FUNCTION_OUTPUT`` (stderr), so ``capsys`` holds only what the CLI
printed, as a user would see it.
"""

from __future__ import annotations

import io
import json
import time

import pytest
from tagpin import wiring
from tagpin_cli import environment
from tagpin_cli.main import main
from tagpin_local import lambda_runtime
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image

from tests.support.constants import STATE_TABLE
from tests.support.stack import drain, empty

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


def web(stack) -> str:
    return f"{stack.registry.host}/demo/web:stable"


def test_status_history_and_exit_codes(stack, endpoints, capsys):
    digest = push_image(stack.registry.url, "demo/web", "stable")
    settle(stack)
    code, rows = run(capsys, endpoints, "status", "--exit-code")
    assert code == 0
    (row,) = [r for r in rows if r["image"] == web(stack)]
    assert row["image"] == f"{stack.registry.host}/demo/web:stable" and row["digest"] == digest
    assert row["targets"][0]["condition"] == "current"

    newer = push_image(stack.registry.url, "demo/web", "stable")
    stack.run_poller()  # enqueued, not yet applied: the target is behind
    code, rows = run(capsys, endpoints, "status", "--exit-code")
    (row,) = [r for r in rows if r["image"] == web(stack)]
    assert code == 4 and row["digest"] == newer and row["targets"][0]["condition"] in ("behind", "pending")
    drain(stack)

    code, events = run(capsys, endpoints, "history", f"{stack.registry.host}/demo/web:stable")
    assert code == 0
    assert [e["digest"] for e in events[:2]] == [newer, digest]
    assert {e["status"] for e in events[:2]} == {"applied"} and events[0]["trigger"] == "poll"
    assert run(capsys, endpoints, "history", "nosuch/target")[0] == 2


def test_plan_is_a_dry_run(stack, endpoints, capsys):
    push_image(stack.registry.url, "demo/web", "stable")  # the tag exists and the target runs it
    settle(stack)
    before = stack.kube.get("Deployment", "default", "web")["spec"]["template"]["spec"]["containers"][0][
        "image"
    ]
    patches = stack.kube.count("PATCH")
    code, rows = run(capsys, endpoints, "plan")
    (row,) = [r for r in rows if r["image"] == web(stack)]
    assert code == 0 and row["action"] == "none"
    digest = push_image(stack.registry.url, "demo/web", "stable")
    code, rows = run(capsys, endpoints, "plan")
    (row,) = [r for r in rows if r["image"] == web(stack)]
    assert code == 4
    assert row["action"] == "roll" and row["to"].endswith("@" + digest) and row["current"] == before
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
    # The stack is shared: start from empty queues, whatever earlier tests left on them.
    for url in (stack.queue_url, stack.dlq_url):
        empty(stack, url)
    body = json.dumps(
        {"image": "x", "digest": "y", "observed_at": int(time.time() * 1000), "trigger": "poll"}
    )
    sqs.send_message(
        QueueUrl=stack.dlq_url, MessageBody=body, MessageGroupId="grp", MessageDeduplicationId="d1"
    )
    code, result = run(capsys, endpoints, "redrive")
    assert code == 0 and result["moved"] == 1
    # Only ours: a verification an earlier test left in flight (hidden until due) may come back
    # on the same queue meanwhile.
    received = sqs.receive_message(
        QueueUrl=stack.queue_url,
        MessageSystemAttributeNames=["MessageGroupId"],
        MaxNumberOfMessages=10,
        WaitTimeSeconds=1,
    )["Messages"]
    (message,) = [m for m in received if m["Attributes"]["MessageGroupId"] == "grp"]
    assert message["Body"] == body
    sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"])
    assert sqs.receive_message(QueueUrl=stack.dlq_url, WaitTimeSeconds=0).get("Messages", []) == []


def test_a_failed_scheduled_run_is_kept_and_redrive_lists_and_clears_it(
    stack, endpoints, capsys, monkeypatch
):
    """A scheduled run that fails twice is filed in the dead-letter queue (as FailedInvocationsRule
    does on AWS), where the alarm watches; redrive moves the change back and lists the failed run."""
    sqs = stack.client("sqs")
    for url in (stack.queue_url, stack.dlq_url):
        empty(stack, url)
    monkeypatch.setenv("TAGPIN_STATE_TABLE", "no-such-table")  # every poll fails
    wiring.reset()
    try:
        assert stack.invoke_async("poller", lambda_runtime.scheduled_event()) is False
    finally:
        monkeypatch.undo()
        wiring.reset()
    (record,) = sqs.receive_message(
        QueueUrl=stack.dlq_url, MessageSystemAttributeNames=["MessageGroupId"], VisibilityTimeout=0
    )["Messages"]
    assert record["Attributes"]["MessageGroupId"] == "failed-invocations"
    event = json.loads(record["Body"])
    assert event["detail-type"] == lambda_runtime.FAILURE_DETAIL_TYPE
    assert event["detail"]["requestContext"]["approximateInvokeCount"] == 2  # the retry, then filed
    change = json.dumps({"image": "x", "digest": "y", "observed_at": 1, "trigger": "poll"})
    sqs.send_message(QueueUrl=stack.dlq_url, MessageBody=change, MessageGroupId="grp")
    code, result = run(capsys, endpoints, "redrive")
    assert code == 0 and result["moved"] == 1
    (failed,) = result["failed_invocations"]
    assert failed["function"] == "tagpin-poller" and "ResourceNotFoundException" in failed["error"]
    assert sqs.receive_message(QueueUrl=stack.dlq_url, WaitTimeSeconds=0).get("Messages", []) == []
    (moved,) = sqs.receive_message(QueueUrl=stack.queue_url, WaitTimeSeconds=1)["Messages"]
    assert moved["Body"] == change
    sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=moved["ReceiptHandle"])


def test_missing_local_stack_is_exit_3(tmp_path, capsys):
    assert main(["--local", str(tmp_path / "none.json"), "status"]) == 3
    assert "tagpin local" in capsys.readouterr().err


# -- global options -------------------------------------------------------------------------------
def test_global_options_before_or_after_the_command(stack, endpoints, capsys, tmp_path, monkeypatch):
    """--local, --endpoints, --json, --region: before or after the command; --local alone reads the
    default endpoints file; the old `--local FILE` still works."""
    push_image(stack.registry.url, "demo/web", "stable")
    monkeypatch.chdir(tmp_path)
    environment.write_local(stack.endpoints(), tmp_path / environment.LOCAL_FILE)
    forms = [
        ["--local", "--json", "status"],
        ["--local", "status", "--json"],
        ["status", "--local", "--json"],
        ["--json", "status", "--local"],
        ["status", "--json", "--local", "--region", "eu-west-1"],
        ["--local", str(endpoints), "--json", "status"],  # the old form: an explicit file
        [f"--local={endpoints}", "status", "--json"],
        ["--endpoints", str(endpoints), "--json", "status"],
        ["status", "--endpoints", str(endpoints), "--json"],
        ["status", "--local", "--endpoints", str(endpoints), "--json"],
        ["--json", "history", "--local", web(stack)],  # after the command, --local takes no value
        ["history", web(stack), "--local", "--json", "--limit", "5"],
    ]
    for argv in forms:
        code = main(argv)
        captured = capsys.readouterr()
        assert code == 0, (argv, captured.err)
        assert isinstance(json.loads(captured.out), list), argv
        assert captured.err == "", argv
    # the default file is the one in the working directory; a missing one is exit 3, one line
    monkeypatch.chdir(tmp_path / "..")
    for argv in (["--local", "status"], ["status", "--local"]):
        assert main(argv) == 3
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(environment.LOCAL_FILE) in err and "tagpin local" in err
    with pytest.raises(SystemExit) as exited:
        main(["status", "--local", "--stack", "prod"])
    assert exited.value.code == 2 and "one of --stack and --local" in capsys.readouterr().err


# -- labelled workloads ---------------------------------------------------------------------------
def test_labelled_workloads_show_in_status_history_and_plan(stack, endpoints, capsys):
    """A workload followed through the tagpin.dev/follow label (no configuration entry) is listed
    by status, history and plan once the reconciler has indexed it."""
    image = f"{stack.registry.host}/demo/api:stable"
    target = "local/team/Deployment/api/app"
    stack.kube.create(deployment("api", "team", image, labels={"tagpin.dev/follow": "true"}))
    try:
        digest = push_image(stack.registry.url, "demo/api", "stable")
        stack.run_reconciler()
        while stack.consume_once(wait_s=0):
            pass
        code, rows = run(capsys, endpoints, "status")
        assert code == 0
        (row,) = [r for r in rows if r["image"] == image]
        assert row["digest"] == digest
        assert row["targets"] == [
            row["targets"][0]
            | {"target": target, "source": "label", "condition": "current", "digest": digest}
        ]
        configured = next(r for r in rows if r["image"] == web(stack))["targets"][0]
        assert configured["source"] == "configuration"

        code, events = run(capsys, endpoints, "history", image)
        assert code == 0 and events and {e["target"] for e in events} == {target}
        # applied, and verified once its verification (on the same queue) was due and consumed
        assert events[0]["digest"] == digest and events[0]["status"] in ("applied", "verified")
        assert "applied" in {e["status"] for e in events if e["digest"] == digest}
        code, events = run(capsys, endpoints, "history", target)
        assert code == 0 and events[0]["target"] == target

        newer = push_image(stack.registry.url, "demo/api", "stable")
        code, rows = run(capsys, endpoints, "plan")
        (planned,) = [r for r in rows if r["target"] == target]
        assert code == 4 and planned["action"] == "roll" and planned["to"] == f"{image}@{newer}"
    finally:
        stack.kube.delete("Deployment", "team", "api")
        stack.run_reconciler()  # drops it from the index
        while stack.consume_once(wait_s=0):
            pass
    code, rows = run(capsys, endpoints, "status")
    assert image not in {r["image"] for r in rows}


# -- what the CLI prints --------------------------------------------------------------------------
def one_line_error(err: str) -> bool:
    return err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_every_command_prints_one_json_document_or_one_error_line(stack, endpoints, capsys, tmp_path):
    """With --json, stdout is one JSON document whatever the registry and the cluster answer; a
    failure is one line on stderr with the documented exit code; never a traceback."""
    push_image(stack.registry.url, "demo/web", "stable")
    settle(stack)
    good = tmp_path / "good.yaml"
    import yaml

    good.write_text(yaml.safe_dump(stack.config_document()))
    ok = {
        ("status",): 0,
        ("status", "--exit-code"): 0,
        ("history",): 0,
        ("plan",): 0,
        ("resolve", web(stack)): 0,
        ("config", "validate", str(good)): 0,
        ("config", "push", str(good)): 0,
        ("redrive", "--limit", "1"): 0,
        ("doctor",): 0,
    }
    for args, expected in ok.items():
        code = main(["--local", "--endpoints", str(endpoints), "--json", *args])
        captured = capsys.readouterr()
        assert (code, captured.err) == (expected, ""), args
        json.loads(captured.out)  # one document, nothing else

    failures = {
        ("resolve", f"{stack.registry.host}/demo/never:pushed"): 1,  # the registry: 404
        ("resolve", "127.0.0.1:9/demo/web:stable"): 1,  # no registry there
        ("history", "nosuch/target"): 2,
        ("config", "validate", str(tmp_path / "absent.yaml")): 2,
    }
    for args, expected in failures.items():
        code = main(["--local", "--endpoints", str(endpoints), "--json", *args])
        captured = capsys.readouterr()
        assert code == expected and captured.out == "" and one_line_error(captured.err), (args, captured)
    code = main(["--local", "--endpoints", str(tmp_path / "none.json"), "--json", "status"])
    captured = capsys.readouterr()
    assert code == 3 and captured.out == "" and one_line_error(captured.err)

    # The cluster down, a tag the registry does not have: plan and doctor still print one document.
    ghost = f"{stack.registry.host}/demo/ghost:stable"
    stack.kube.create(deployment("ghost", "default", ghost, labels={"tagpin.dev/follow": "true"}))
    try:
        stack.run_reconciler()
        stack.kube.set_down(True)
        code = main(["--local", "--endpoints", str(endpoints), "--json", "plan"])
        captured = capsys.readouterr()
        rows = json.loads(captured.out)
        assert code == 0 and captured.err == ""
        by_image = {r["image"]: r for r in rows}
        assert by_image[ghost]["action"] == "unknown" and "not found" in by_image[ghost]["detail"]
        assert by_image[web(stack)]["action"] == "skip" and "unreachable" in by_image[web(stack)]["detail"]
        code = main(["--local", "--endpoints", str(endpoints), "--json", "doctor"])
        captured = capsys.readouterr()
        assert code == 1 and captured.err == "" and json.loads(captured.out)["ok"] is False
    finally:
        stack.kube.set_down(False)
        stack.kube.delete("Deployment", "default", "ghost")
        stack.run_reconciler()


def test_the_functions_metrics_and_logs_stay_out_of_the_cli_output(stack, endpoints, capsys):
    """The in-process functions print EMF metrics and JSON logs as on Lambda; they go to the
    function output (stderr by default), not to the stdout the CLI's JSON is read from."""
    document = stack.config_document()
    document["images"].append(
        {
            "image": f"{stack.registry.host}/demo/never:pushed",
            "targets": [{"cluster": "local", "namespace": "default", "name": "never", "container": "app"}],
        }
    )
    functions = io.StringIO()
    lambda_runtime.set_function_output(functions)
    try:
        stack.write_config(document)
        stack.run_poller()  # a registry error: the poller's RegistryErrors metric
        stack.run_reconciler()  # and the reconciler's warning (its log)
        code, rows = run(capsys, endpoints, "status")
    finally:
        lambda_runtime.set_function_output(None)
        stack.write_config()
    assert code == 0 and isinstance(rows, list)  # run() parsed stdout as one document
    assert '"_aws"' in functions.getvalue() and "RegistryErrors" in functions.getvalue()
    assert "resolve failed" in functions.getvalue()
    assert '"_aws"' not in LAST_ERR[0]
