"""The commands that decide a rollout, as a person types them (``tagpin`` in a process of its own,
exit code, stdout, stderr): approve and reject a wave waiting for a person, downgrade and clear a
version channel, and status for a target a trust gate blocked. The real handlers on the local stack
with its SQS loop running (stage and prod clusters); every output is checked for the stack's secrets,
the signing key's included. Each test writes the configuration it needs and runs alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from tagpin.domain.config import FollowedImage
from tagpin.ports.state import TargetStatus
from tagpin_local.cosign import Signer, sign_image
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.cli import Cli, document, endpoints_file, failure, printed
from tests.support.stack import running, state_of, target_status, wait_for

pytestmark = pytest.mark.e2e

STAGE, PROD = "stage/app/Deployment/app/app", "prod/app/Deployment/app/app"
CHANNEL = "prod/apps/Deployment/chan/app"
SIGNED = "prod/app/Deployment/signed/app"
KEY_SECRET = "tagpin/signing/release"
WAVE_ALL: dict[str, Any] = {
    "verify_interval_seconds": 1,
    "soak_seconds": 0,
    "waves": [{"name": "all", "clusters": ["prod"]}],
}


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer.generate("ecdsa-p256")


@pytest.fixture(scope="module")
def st(signer: Signer) -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=False, poll_interval=None, consume=True, clusters=["stage", "prod"], rollout_delay=0.2
    )
    with LocalStack(options) as stack:
        assert stack.registry is not None
        host = stack.registry.host
        for cluster in ("stage", "prod"):
            stack.kubes[cluster].create(deployment("app", "app", f"{host}/demo/app:stable", container="app"))
        stack.kubes["prod"].create(deployment("chan", "apps", f"{host}/demo/chan:0.0.1", container="app"))
        stack.kubes["prod"].create(deployment("signed", "app", f"{host}/demo/signed:stable", container="app"))
        stack.put_secret(KEY_SECRET, signer.public_pem)
        yield stack


@pytest.fixture(scope="module")
def cli(st: LocalStack, signer: Signer, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    private = signer.private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return Cli(st, endpoints_file(st, tmp_path_factory.mktemp("cli") / "endpoints.json"), extra={private})


def host(st: LocalStack) -> str:
    assert st.registry is not None
    return st.registry.host


def configure(st: LocalStack, images: list[dict[str, Any]], rollout: dict[str, Any]) -> None:
    st.options.images, st.options.rollout = images, rollout
    st.write_config()


def target(target_id: str) -> dict[str, str]:
    cluster, namespace, _kind, name, container = target_id.split("/")
    return {"cluster": cluster, "namespace": namespace, "name": name, "container": container}


def condition(cli: Cli, image: str, target_id: str) -> dict[str, Any]:
    (row,) = [r for r in cli.json("status") if r["image"] == image]
    (found,) = [t for t in row["targets"] if t["target"] == target_id]
    return dict(found)


def test_approve_and_reject_as_typed(st, cli):
    image = f"{host(st)}/demo/app:stable"
    waves = {"name": "prod", "clusters": ["prod"], "approval": True}
    configure(
        st,
        [{"image": image, "targets": [target(STAGE), target(PROD)]}],
        {
            "verify_interval_seconds": 1,
            "soak_seconds": 0,
            "waves": [{"name": "stage", "clusters": ["stage"]}, waves],
        },
    )

    def awaiting(digest: str) -> bool:
        promotion = state_of(st).promotions.get(image)
        return promotion is not None and promotion.digest == digest and promotion.awaiting_approval

    first = push_image(st.registry.url, "demo/app", "stable")
    st.run_poller()
    wait_for("prod waits for approval", lambda: awaiting(first))
    assert condition(cli, image, PROD)["condition"] == "awaiting-approval"
    approved = cli("approve", PROD)  # by a target of the image
    assert printed(approved).startswith(f"{image}: approved (")
    again = cli("--json", "approve", image)  # a double click
    assert document(again, 1)["decision"] in ("already-decided", "nothing-waiting")
    wait_for("prod verified", lambda: target_status(st, PROD, first) is TargetStatus.VERIFIED)

    second = push_image(st.registry.url, "demo/app", "stable")
    st.run_poller()
    wait_for("the second digest waits", lambda: awaiting(second))
    stale, unknown = cli.many(["--json", "approve", image, "--digest", first], ["reject", "nosuch/image:tag"])
    assert document(stale, 1)["decision"] == "stale" and awaiting(second)  # nothing changed
    assert "is neither a followed image nor a target id" in failure(unknown, 2)
    rejected = cli.json("reject", image, "--digest", second)
    assert rejected["decision"] == "rejected" and rejected["digest"] == second
    tag = state_of(st).tags.get(image)
    assert tag is not None and tag.blocked  # marked bad, as a rollback does
    assert running(st, PROD).endswith("@" + first)  # prod untouched
    assert document(cli("--json", "reject", image), 1)["decision"] == "nothing-waiting"


def test_downgrade_and_clear_as_typed(st, cli):
    entry = {
        "image": f"{host(st)}/demo/chan",
        "policy": "^2",
        "channel": "stable",
        "targets": [target(CHANNEL)],
    }
    key = FollowedImage.model_validate(entry).image
    configure(st, [entry], WAVE_ALL)
    pushed = {tag: push_image(st.registry.url, "demo/chan", tag) for tag in ("2.0.0", "2.1.0")}
    st.run_poller()
    wait_for("2.1.0 verified", lambda: target_status(st, CHANNEL, pushed["2.1.0"]) is TargetStatus.VERIFIED)
    status, plan = cli.many(["--json", "status"], ["--json", "plan"])
    assert [r["version"] for r in document(status) if r["image"] == key] == ["2.1.0"]
    assert [(r["version"], r["action"]) for r in document(plan) if r["image"] == key] == [("2.1.0", "none")]

    down = cli("downgrade", key, "2.0.0")
    said = (
        f"{key}: head moved down to 2.0.0 ({pushed['2.0.0']}); held back: 2.1.0 (tagpin clear releases one)"
    )
    assert printed(down) == said + "\n"
    wait_for("prod on 2.0.0", lambda: running(st, CHANNEL) == f"{host(st)}/demo/chan:2.0.0@{pushed['2.0.0']}")
    st.run_poller()  # held back: the poll does not move it up again
    assert [r["version"] for r in cli.json("status") if r["image"] == key] == ["2.0.0"]
    assert running(st, CHANNEL).endswith("@" + pushed["2.0.0"])

    assert cli.json("clear", key, "2.1.0") == {"channel": key, "version": "2.1.0", "cleared": True}
    st.run_poller()
    wait_for(
        "2.1.0 again after the clear",
        lambda: target_status(st, CHANNEL, pushed["2.1.0"]) is TargetStatus.VERIFIED,
    )
    assert printed(cli("clear", key, "2.1.0"), 1) == "2.1.0: was not marked bad\n"

    # what a person may mistype
    not_channel, out_of_range, not_version, no_such, clear_unknown = cli.many(
        ["downgrade", f"{host(st)}/demo/app:stable", "1.0.0"],
        ["downgrade", key, "3.0.0"],
        ["downgrade", key, "latest"],
        ["downgrade", key, "2.0.9"],
        ["clear", "nosuch@stable", "2.1.0"],
    )
    assert "is not a followed version channel" in failure(not_channel, 2)
    assert "'3.0.0' is not a version" in failure(out_of_range, 2)
    assert "'latest' is not a version" in failure(not_version, 2)
    assert "ManifestNotFound" in failure(no_such, 1)  # a version the registry does not have
    assert "is not a followed version channel" in failure(clear_unknown, 2)


def test_status_shows_why_a_blocked_target_is_blocked(st, cli, signer):
    """A digest a trust gate refused: status says `blocked` with the gate's reason (before: `behind`,
    with the text of the last verification of the digest the target still runs)."""
    image = f"{host(st)}/demo/signed:stable"
    gate = {"mode": "require", "keys": [{"secret": KEY_SECRET}]}
    configure(st, [{"image": image, "signatures": gate, "targets": [target(SIGNED)]}], WAVE_ALL)
    good = push_image(st.registry.url, "demo/signed", "stable", content=b"signed")
    sign_image(st.registry.url, "demo/signed", good, signer)
    st.run_poller()
    wait_for("the signed digest verified", lambda: target_status(st, SIGNED, good) is TargetStatus.VERIFIED)
    verified = condition(cli, image, SIGNED)
    assert verified["condition"] == "current" and verified["detail"]

    unsigned = push_image(st.registry.url, "demo/signed", "stable", content=b"unsigned")
    st.run_poller()
    wait_for(
        "the unsigned digest blocked",
        lambda: any(
            h.status == "blocked" and h.digest == unsigned for h in state_of(st).history.of_target(SIGNED)
        ),
    )
    status, exit_code, table, history, plan = cli.many(
        ["--json", "status"],
        ["--json", "status", "--exit-code"],
        ["status"],
        ["--json", "history", SIGNED],
        ["--json", "plan"],
    )
    (row,) = [r for r in document(status) if r["image"] == image]
    (shown,) = row["targets"]
    assert row["digest"] == unsigned and shown["digest"] == good  # it still runs the signed one
    assert shown["condition"] == "blocked" and shown["detail"].startswith("signature: unsigned")
    assert shown["detail"] != verified["detail"]
    document(exit_code, 4)  # a blocked target fails --exit-code, as a behind one does
    assert "blocked" in printed(table) and "signature: unsigned" in table.out
    assert [e["status"] for e in document(history) if e["digest"] == unsigned] == ["blocked"]
    (planned,) = [r for r in document(plan) if r["target"] == SIGNED]
    assert planned["action"] == "none" and planned["detail"].startswith("blocked: signature: unsigned")
    assert running(st, SIGNED).endswith("@" + good)


def test_plan_says_a_later_wave_waits_for_the_wave_before_it(st, cli):
    """``tagpin plan`` asks the wave gate as the consumer does: a target of a wave the promotion
    has not reached waits (and says for which wave, and for what), it does not "roll"."""
    image = f"{host(st)}/demo/waves:stable"
    first_wave, second_wave = "stage/app/Deployment/waves/app", "prod/app/Deployment/waves/app"
    push_image(st.registry.url, "demo/waves", "stable")
    for cluster in ("stage", "prod"):
        st.kubes[cluster].create(deployment("waves", "app", image, container="app"))
    configure(
        st,
        [{"image": image, "targets": [target(first_wave), target(second_wave)]}],
        {
            "verify_interval_seconds": 1,
            "soak_seconds": 3600,
            "waves": [{"name": "stage", "clusters": ["stage"]}, {"name": "prod", "clusters": ["prod"]}],
        },
    )
    rows, table = cli.many(["--json", "plan"], ["plan"])
    by_target = {r["target"]: r for r in document(rows, 4) if r["image"] == image}
    assert by_target[first_wave]["action"] == "roll"
    assert by_target[second_wave]["action"] == "wait", by_target[second_wave]
    assert (
        by_target[second_wave]["detail"]
        == "waiting: wave prod waits for wave stage, where its promotion starts"
    )
    assert "wave prod waits for wave stage" in printed(table, 4)

    st.run_poller()
    digest = by_target[first_wave]["digest"]
    wait_for("stage verified", lambda: target_status(st, first_wave, digest) is TargetStatus.VERIFIED)
    wait_for("stage soaking", lambda: (p := state_of(st).promotions.get(image)) and p.wave_verified_at)
    by_target = {r["target"]: r for r in cli.json("plan") if r["image"] == image}
    assert by_target[first_wave]["action"] == "none"  # it runs the digest
    assert by_target[second_wave]["action"] == "wait"
    assert by_target[second_wave]["detail"].startswith(
        "waiting: wave prod waits for wave stage to soak (until "
    )
    assert running(st, second_wave) == image  # the consumer did not touch it either


def test_a_broken_stored_configuration_is_the_stacks_failure_not_a_typing_error(st, cli):
    """approve, reject, hold, downgrade and clear refuse what a person typed with exit 2; a stored
    configuration that fails its validation is the stack's state, not the person's typing: exit 1
    (as `tagpin status` says it), naming the configuration's error."""
    image = f"{host(st)}/demo/app:stable"
    broken = "images:\n  - image: " + image + "\n    targets: not-a-list\n"
    st.client("ssm").put_parameter(Name="/tagpin/config", Value=broken, Type="String", Overwrite=True)
    try:
        for argv in (["approve", image], ["hold", PROD], ["status"]):
            ran = cli(*argv)
            assert ran.code == 1 and ran.out == "", (argv, ran.code, ran.err)
            assert "ConfigError" in ran.err and "targets" in ran.err, (argv, ran.err)
    finally:
        st.write_config()
