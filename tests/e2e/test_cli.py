"""The tagpin CLI against the local stack, as a person runs it: ``tagpin`` in a process of its own
(``--endpoints FILE``, the file `tagpin local` writes), its exit code, stdout and stderr. Every
output is checked for the stack's secrets (``tests.support.cli``).

Every test sets up what it needs (images pushed, state settled) and runs alone:
``pytest tests/e2e/test_cli.py::<name>``. The module's tests share one stack and so its changes
queue, on which a verification one test scheduled comes due during a later one: a test that counts
or reads what is on a queue gives the CLI queues of its own (``own_queues``) and reads only those.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from tagpin import wiring
from tagpin_cli import environment
from tagpin_local import lambda_runtime
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

from tests.support.cli import Cli, document, endpoints_file, failure, one_line_error, printed, tagpin
from tests.support.constants import STATE_TABLE
from tests.support.stack import drain, messages_on, own_queues, running

pytestmark = pytest.mark.e2e

TARGET = "local/default/Deployment/web/web"


@pytest.fixture(scope="module")
def cli(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    yield Cli(stack, endpoints_file(stack, tmp_path_factory.mktemp("cli") / "endpoints.json"))


def settle(stack: LocalStack) -> None:
    stack.run_poller()
    drain(stack)


def web(stack: LocalStack) -> str:
    assert stack.registry is not None
    return f"{stack.registry.host}/demo/web:stable"


def push(stack: LocalStack, repository: str = "demo/web", tag: str = "stable") -> str:
    assert stack.registry is not None
    return push_image(stack.registry.url, repository, tag)


def test_status_history_and_exit_codes(stack, cli):
    digest = push(stack)
    settle(stack)
    rows, table = cli.many(["--json", "status", "--exit-code"], ["status"])
    (row,) = [r for r in document(rows) if r["image"] == web(stack)]
    assert row["digest"] == digest and row["targets"][0]["condition"] == "current"
    assert "followed tags" in printed(table) and "current" in table.out

    newer = push(stack)
    stack.run_poller()  # enqueued, not yet applied: the target is behind
    rows = cli.json("status", "--exit-code", code=4)
    (row,) = [r for r in rows if r["image"] == web(stack)]
    assert row["digest"] == newer and row["targets"][0]["condition"] in ("behind", "pending")
    drain(stack)

    of_image, of_target, of_all, table, wrong = cli.many(
        ["--json", "history", web(stack)],
        ["--json", "history", TARGET, "--limit", "1"],
        ["--json", "history"],
        ["history", TARGET],
        ["history", "nosuch/target"],
    )
    # only this test's digests: a verification an earlier test left comes due on the shared queue
    events = [e for e in document(of_image) if e["digest"] in (digest, newer)]
    applied = [e for e in events if e["status"] == "applied"]
    assert [e["digest"] for e in applied[:2]] == [newer, digest] and applied[0]["trigger"] == "poll"
    assert len(document(of_target)) == 1 and TARGET in {e["target"] for e in document(of_all)}
    assert "history" in printed(table) and "applied" in table.out
    assert "'nosuch/target' is neither a followed image nor a target id" in failure(wrong, 2)


def test_plan_is_a_dry_run(stack, cli, tmp_path):
    push(stack)  # the tag exists and the target runs it
    settle(stack)
    # The CLI's own queues: whatever plan sent would be there, and nothing else is.
    queue, dead_letters = own_queues(stack)
    endpoints = endpoints_file(
        stack, tmp_path / "plan.json", queue_url=queue, dead_letter_queue_url=dead_letters
    )
    before = running(stack, TARGET)
    patches = stack.kube.count("PATCH")
    (row,) = [r for r in cli.json("plan", endpoints=endpoints) if r["image"] == web(stack)]
    assert row["action"] == "none" and row["current"] == before
    digest = push(stack)
    rows, table = cli.many(["--json", "plan"], ["plan"], endpoints=endpoints)
    (row,) = [r for r in document(rows, 4) if r["image"] == web(stack)]
    assert row["action"] == "roll" and row["to"] == f"{web(stack)}@{digest}" and row["current"] == before
    assert (
        "plan (dry run: nothing changed)" in printed(table, 4) and "roll" in table.out and TARGET in table.out
    )
    # Nothing changed: no patch even sent (a refused one counts too), no state write, nothing enqueued.
    assert stack.kube.count("PATCH") == patches and running(stack, TARGET) == before
    tag = stack.client("dynamodb").get_item(
        TableName=STATE_TABLE, Key={"pk": {"S": f"TAG#{web(stack)}"}, "sk": {"S": "STATE"}}
    )["Item"]
    assert tag["digest"]["S"] != digest
    assert messages_on(stack, queue) == 0 and messages_on(stack, dead_letters) == 0


def test_resolve(stack, cli):
    assert stack.registry is not None
    digest = push(stack)
    # a repository and a version policy: its candidates, the head, why newer tags are not chosen
    versions = {tag: push(stack, "demo/versions", tag) for tag in ("1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0")}
    repository = f"{stack.registry.host}/demo/versions"
    resolved, table, policy, absent, nowhere, tagged, nonsense = cli.many(
        ["--json", "resolve", web(stack)],
        ["resolve", web(stack)],
        ["--json", "resolve", repository, "--policy", "^1"],
        ["resolve", f"{stack.registry.host}/demo/web:never"],
        ["resolve", "127.0.0.1:9/demo/web:stable"],  # no registry there
        ["resolve", web(stack), "--policy", "^1"],
        ["resolve", repository, "--policy", "^^nonsense"],
    )
    result = document(resolved)
    assert result["digest"] == digest and result["method"] == "HEAD" and result["auth"] == "anonymous"
    assert digest[:19] in printed(table) and "HEAD" in table.out
    result = document(policy)
    assert result["head"] == "1.1.0" and result["digest"] == versions["1.1.0"]
    assert result["candidates"] == ["1.1.0", "1.0.0"] and result["tags_listed"] == 4
    assert {r.split(": ", 1)[0] for r in result["rejected"]} == {"2.0.0", "1.2.0-rc.1"}
    assert "ManifestNotFound" in failure(absent, 1)
    failure(nowhere, 1)
    assert "without a tag" in failure(tagged, 2)
    failure(nonsense, 2)


def test_config_validate_and_push(stack, cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "clusters: {}\nimages: [{image: nginx, targets: [{cluster: nowhere, name: w, container: w}]}]\n"
    )
    invalid, absent = cli.many(
        ["config", "validate", str(bad)], ["config", "validate", str(tmp_path / "absent")]
    )
    assert "images.0.targets.0.cluster: unknown cluster 'nowhere'" in failure(invalid, 2)
    assert "No such file or directory" in failure(absent, 2)
    good = tmp_path / "good.yaml"
    document = stack.config_document()
    document["images"][0]["targets"][0]["namespace"] = "team"
    good.write_text(yaml.safe_dump(document))
    result = cli.json("config", "validate", str(good))
    assert result == {"file": str(good), "valid": True, "clusters": 1, "images": 1, "targets": 1}
    try:
        result = cli.json("config", "push", str(good))
        assert result["pushed"] is True and result["targets"] == 1 and result["parameter"] == "/tagpin/config"
        stored = stack.client("ssm").get_parameter(Name="/tagpin/config")["Parameter"]["Value"]
        assert "team" in stored
        cli.fails("config", "push", str(bad), code=2)  # an invalid document is never pushed
        assert stack.client("ssm").get_parameter(Name="/tagpin/config")["Parameter"]["Value"] == stored
        table = cli("config", "push", str(good))
        assert (table.code, table.err) == (0, "") and "pushed: True" in table.out
        # from a pipe (`envsubst < tagpin.yaml.in | tagpin config push /dev/stdin`): read once, the
        # document validated is the one pushed (read twice, the second read found the pipe empty)
        document["images"][0]["targets"][0]["namespace"] = "piped"
        piped = yaml.safe_dump(document)
        ran = cli("--json", "config", "push", "/dev/stdin", stdin=piped)
        assert (ran.code, ran.err) == (0, "") and ran.json()["pushed"] is True, ran
        assert stack.client("ssm").get_parameter(Name="/tagpin/config")["Parameter"]["Value"] == piped
    finally:
        stack.write_config()


def test_redrive_moves_dead_letters_back(stack, cli, tmp_path):
    queue, dead_letters = own_queues(stack)
    endpoints = endpoints_file(
        stack, tmp_path / "e.json", queue_url=queue, dead_letter_queue_url=dead_letters
    )
    sqs = stack.client("sqs")
    bodies = [
        json.dumps(
            {"image": "x", "digest": f"y{n}", "observed_at": int(time.time() * 1000), "trigger": "poll"}
        )
        for n in range(2)
    ]
    for n, body in enumerate(bodies):
        sqs.send_message(
            QueueUrl=dead_letters, MessageBody=body, MessageGroupId=f"g{n}", MessageDeduplicationId=f"d{n}"
        )
    result = cli.json("redrive", "--limit", "1", endpoints=endpoints)
    assert result["moved"] == 1 and result["failed_invocations"] == [] and result["to"] == queue
    table = cli("redrive", endpoints=endpoints)
    assert (table.code, table.err) == (0, "") and "moved 1 message(s)" in table.out
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    assert sorted(m["Body"] for m in received) == sorted(bodies)
    assert messages_on(stack, dead_letters) == 0


def test_a_failed_scheduled_run_is_kept_and_redrive_lists_and_clears_it(stack, cli, tmp_path, monkeypatch):
    """A scheduled run that fails twice is filed in the dead-letter queue (as FailedInvocationsRule
    does on AWS), where the alarm watches; redrive moves the change back and lists the failed run."""
    queue, dead_letters = own_queues(stack)
    endpoints = endpoints_file(
        stack, tmp_path / "e.json", queue_url=queue, dead_letter_queue_url=dead_letters
    )
    sqs = stack.client("sqs")
    monkeypatch.setattr(stack, "dlq_url", dead_letters)  # where the stack files failed runs
    monkeypatch.setenv("TAGPIN_STATE_TABLE", "no-such-table")  # every poll fails
    wiring.reset()
    try:
        assert stack.invoke_async("poller", lambda_runtime.scheduled_event()) is False
    finally:
        monkeypatch.undo()
        wiring.reset()
    (record,) = sqs.receive_message(
        QueueUrl=dead_letters, MessageSystemAttributeNames=["MessageGroupId"], VisibilityTimeout=0
    )["Messages"]
    assert record["Attributes"]["MessageGroupId"] == "failed-invocations"
    event = json.loads(record["Body"])
    assert event["detail-type"] == lambda_runtime.FAILURE_DETAIL_TYPE
    assert event["detail"]["requestContext"]["approximateInvokeCount"] == 2  # the retry, then filed
    change = json.dumps({"image": "x", "digest": "y", "observed_at": 1, "trigger": "poll"})
    sqs.send_message(
        QueueUrl=dead_letters, MessageBody=change, MessageGroupId="grp", MessageDeduplicationId="c"
    )
    table = cli("redrive", endpoints=endpoints)
    assert (table.code, table.err) == (0, ""), str(table)
    assert "moved 1 message(s)" in table.out and "removed 1 record(s) of failed runs" in table.out
    assert "tagpin-poller" in table.out and "ResourceNotFoundException" in table.out
    assert messages_on(stack, dead_letters) == 0
    (moved,) = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    assert moved["Body"] == change
    again = cli.json("redrive", endpoints=endpoints)
    assert (again["moved"], again["failed_invocations"]) == (0, [])


def test_hold_and_release_as_typed(stack, cli):
    current = push(stack)
    settle(stack)
    assert printed(cli("hold", TARGET)) == f"{TARGET}: held\n"
    again, status = cli.many(["hold", TARGET], ["--json", "status"])
    assert printed(again) == f"{TARGET}: was held already\n"
    (row,) = [r for r in document(status) if r["image"] == web(stack)]
    assert row["targets"][0]["condition"] == "held"
    newer = push(stack)
    settle(stack)
    stack.run_reconciler()
    drain(stack)
    assert running(stack, TARGET).endswith("@" + current)  # held: the new digest is not applied
    (planned,) = [r for r in cli.json("plan") if r["target"] == TARGET]
    assert planned["action"] == "none" and planned["detail"].startswith("held: held by ")
    assert (
        printed(cli("release", TARGET))
        == f"{TARGET}: released; the digest of {web(stack)} is applied again\n"
    )
    drain(stack)
    assert running(stack, TARGET) == f"{web(stack)}@{newer}"
    assert printed(cli("release", TARGET), 1) == f"{TARGET}: was not held\n"

    # a hold with an end, in JSON
    held = cli.json("hold", TARGET, "--until", "2099-12-01T09:00:00Z")
    assert held == {"target": TARGET, "held": True, "until": "2099-12-01T09:00:00Z"}
    (row,) = [r for r in cli.json("status") if r["image"] == web(stack)]
    assert (
        row["targets"][0]["condition"] == "held" and "until 2099-12-01T09:00Z" in row["targets"][0]["detail"]
    )
    assert cli.json("release", TARGET) == {"target": TARGET, "released": True, "healing": web(stack)}
    drain(stack)

    # what a person may mistype: one line, exit 2, nothing held
    unknown, word, naive, past, release = cli.many(
        ["hold", "local/default/Deployment/nosuch/web"],
        ["hold", TARGET, "--until", "tomorrow"],
        ["hold", TARGET, "--until", "2099-12-01T09:00:00"],
        ["hold", TARGET, "--until", "2001-01-01T00:00:00Z"],
        ["release", "nosuch"],
    )
    assert "'local/default/Deployment/nosuch/web' is not a followed target" in failure(unknown, 2)
    assert "not an ISO 8601 time" in failure(word, 2)
    assert "give a time zone" in failure(naive, 2)
    assert "in the past" in failure(past, 2)
    assert "is not a followed target" in failure(release, 2)
    (row,) = [r for r in cli.json("status") if r["image"] == web(stack)]
    assert row["targets"][0]["condition"] != "held"


# -- global options and usage -----------------------------------------------------------------------
def test_global_options_before_or_after_the_command(stack, cli, tmp_path):
    """--local, --endpoints, --json, --region: before or after the command; --local alone reads the
    default endpoints file; the old `--local FILE` still works."""
    push(stack)
    endpoints = str(cli.endpoints)
    endpoints_file(stack, tmp_path / environment.LOCAL_FILE)  # the default file, in the working directory
    forms = [
        ["--local", "--json", "status"],
        ["status", "--local", "--json", "--region", "eu-west-1"],
        ["--local", endpoints, "--json", "status"],  # the old form: an explicit file
        [f"--local={endpoints}", "status", "--json"],
        ["history", web(stack), "--local", "--json", "--limit", "5"],  # after the command: no value
        ["status", "--endpoints", endpoints, "--json"],
    ]
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda argv: tagpin(*argv, cwd=tmp_path), forms))
    for ran in runs:
        assert isinstance(document(ran), list), str(ran)
    cli.runs.extend(runs)
    # the default file is the one in the working directory; a missing one is exit 3, one line
    for argv in (["--local", "status"], ["status", "--local"]):
        ran = tagpin(*argv, cwd=tmp_path.parent)
        assert ran.code == 3 and ran.out == "" and one_line_error(ran.err), str(ran)
        assert str(environment.LOCAL_FILE) in ran.err and "tagpin local" in ran.err
    ran = tagpin("status", "--local", "--stack", "prod")
    assert ran.code == 2 and ran.out == "" and "one of --stack and --local" in ran.err
    # a deployed stack that is not there: exit 3, one line (the stack's moto answers for AWS here)
    ran = tagpin("--stack", "nosuch", "--region", "us-east-1", "status")
    assert ran.code == 3 and ran.out == "" and one_line_error(ran.err) and "'nosuch'" in ran.err, str(ran)


# -- labelled workloads ---------------------------------------------------------------------------
def test_labelled_workloads_show_in_status_history_and_plan(stack, cli):
    """A workload followed through the tagpin.dev/follow label (no configuration entry) is listed
    by status, history and plan once the reconciler has indexed it."""
    image = f"{stack.registry.host}/demo/api:stable"
    target = "local/team/Deployment/api/app"
    stack.kube.create(deployment("api", "team", image, labels={"tagpin.dev/follow": "true"}))
    try:
        digest = push(stack, "demo/api")
        stack.run_reconciler()
        drain(stack)
        (row,) = [r for r in cli.json("status") if r["image"] == image]
        assert row["digest"] == digest
        assert row["targets"] == [
            row["targets"][0]
            | {"target": target, "source": "label", "condition": "current", "digest": digest}
        ]
        configured = next(r for r in cli.json("status") if r["image"] == web(stack))["targets"][0]
        assert configured["source"] == "configuration"

        events = cli.json("history", image)
        assert events and {e["target"] for e in events} == {target}
        # applied, and verified once its verification (on the same queue) was due and consumed
        assert events[0]["digest"] == digest and events[0]["status"] in ("applied", "verified")
        assert "applied" in {e["status"] for e in events if e["digest"] == digest}
        assert cli.json("history", target)[0]["target"] == target

        newer = push(stack, "demo/api")
        (planned,) = [r for r in cli.json("plan", code=4) if r["target"] == target]
        assert planned["action"] == "roll" and planned["to"] == f"{image}@{newer}"
    finally:
        stack.kube.delete("Deployment", "team", "api")
        stack.run_reconciler()  # drops it from the index
        drain(stack)
    assert image not in {r["image"] for r in cli.json("status")}


# -- what the CLI prints --------------------------------------------------------------------------
def test_doctor_and_plan_print_one_document_whatever_the_cluster_and_registry_answer(stack, cli):
    """With --json, stdout is one JSON document whatever the registry and the cluster answer (every
    other test reads each command's --json output the same way: exit code, nothing on stderr, one
    document); the doctor's table says what to fix."""
    push(stack)
    settle(stack)
    strict, table = cli.many(["--json", "doctor", "--strict"], ["doctor"])
    assert document(strict)["ok"] is True and "all checks passed" in printed(table)

    # The cluster down, a tag the registry does not have: plan and doctor still print one document.
    ghost = f"{stack.registry.host}/demo/ghost:stable"
    stack.kube.create(deployment("ghost", "default", ghost, labels={"tagpin.dev/follow": "true"}))
    try:
        stack.run_reconciler()
        stack.kube.set_down(True)
        plan, doctor = cli.many(["--json", "plan"], ["--json", "doctor"])
        by_image = {r["image"]: r for r in document(plan)}
        assert by_image[ghost]["action"] == "unknown" and "not found" in by_image[ghost]["detail"]
        assert by_image[web(stack)]["action"] == "skip" and "unreachable" in by_image[web(stack)]["detail"]
        report = document(doctor, 1)
        failed = {(c["check"], c["subject"]) for c in report["checks"] if c["status"] == "fail"}
        assert report["ok"] is False and ("cluster", "local") in failed, report
    finally:
        stack.kube.set_down(False)
        stack.kube.delete("Deployment", "default", "ghost")
        stack.run_reconciler()
