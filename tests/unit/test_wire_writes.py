"""The Move on the write-back queue: a ``WriteRequest`` carries one ``move``, reads the flat shape
deployed stacks wrote (still on the queue or in its dead letters at an update) with the same group
and deduplication ids, and is written in both shapes for this release, so the version before it
(its module kept verbatim in tests/support/deployed) reads what this one sends.

The old bodies and ids below are literals, as the code at 8d50e8c sent them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from pydantic import ValidationError
from tagpin.adapters.sqs_writes import SqsWriteQueue
from tagpin.domain.config import WriteBackFile, WriteMode
from tagpin.domain.gitops.writes import FileWrite, WriteKind, WriteRequest
from tagpin.domain.moves import FIELDS, Move, Trigger
from tagpin.domain.refs import Digest

from tests.support.constants import D0, D1
from tests.support.deployed import writes_8d50e8c as deployed
from tests.support.queues import RecordingSqs

URL = "https://git.example.com/org/apps.git"
IMAGE = "registry.example.com/team/web:1.4"
TARGET = "dev/shop/Deployment/web/app"
FILE = {"path": "apps/web/kustomization.yaml", "kind": "kustomize", "name": "registry.example.com/team/web"}
FILES = '"files":[{"file":' + json.dumps(FILE, separators=(",", ":")) + ',"targets":["' + TARGET + '"]}]'
FLAT = {"image", "digest", "observed_at", "trigger", "correlation_id"}  # what the old shape carried

# (body as deployed stacks sent it, its MessageDeduplicationId; its group is the repository)
OLD_REQUESTS = [
    pytest.param(
        '{"kind":"pin","repository":"' + URL + '","branch":"main","mode":"commit","image":"' + IMAGE + '",'
        '"digest":"' + D1 + '","reference":"' + IMAGE + "@" + D1 + '","observed_at":1763702400000,'
        '"trigger":"webhook","correlation_id":"VxYz1gHhIAMEabc=","previous":{"'
        + TARGET
        + '":"'
        + IMAGE
        + "@"
        + D0
        + '"},"owners":{"'
        + TARGET
        + '":"Argo CD Application shop"},'
        + FILES
        + "}",
        "697e9c0e5bab024367a86a89539767dc5f054a7124e6bf1c43ba021c745c8e3b",
        id="pin",
    ),
    pytest.param(
        '{"kind":"revert","repository":"'
        + URL
        + '","branch":"main","mode":"pull-request","image":"'
        + IMAGE
        + '","digest":"'
        + D1
        + '","reference":"'
        + IMAGE
        + "@"
        + D0
        + '","observed_at":1763702400000,'
        '"trigger":"rollback","reason":"crash loop","previous":{},"owners":{},' + FILES + "}",
        "10110d01bfa26dbf2d126fc373da0e7fe01b35e43f6453cb1778f9504c1fb3be",
        id="revert",
    ),
]


def _sent(request: WriteRequest) -> dict[str, Any]:
    client = RecordingSqs()
    SqsWriteQueue(client, "url").send(request)
    (sent,) = client.sent
    return sent


@pytest.mark.parametrize(("body", "deduplication"), OLD_REQUESTS)
def test_a_request_from_a_deployed_stack_is_read_and_keeps_its_queue_ids(
    body: str, deduplication: str
) -> None:
    request = WriteRequest.model_validate_json(body)
    flat = json.loads(body)
    assert request.move == Move(
        image=flat["image"],
        digest=flat["digest"],
        observed_at=flat["observed_at"],
        trigger=flat["trigger"],
        correlation_id=flat.get("correlation_id"),
    )
    assert isinstance(request.move.digest, Digest)
    assert (request.kind, request.repository, request.reference) == (flat["kind"], URL, flat["reference"])
    assert request.targets == (TARGET,) and request.previous == flat["previous"]
    # sent again (a redrive): the ids deployed stacks gave it
    sent = _sent(request)
    assert (sent["MessageGroupId"], sent["MessageDeduplicationId"]) == (URL, deduplication)
    assert request.flat_json() == body  # byte for byte the body they sent
    # written in both shapes: the move whole, and flat beside it; read back the same
    written = json.loads(sent["MessageBody"])
    assert {k: v for k, v in written.items() if k in FIELDS} == written["move"]
    assert WriteRequest.model_validate_json(sent["MessageBody"]) == request


def _new(kind: WriteKind, mode: WriteMode = WriteMode.COMMIT) -> WriteRequest:
    pin = kind is WriteKind.PIN
    move = Move(
        image=IMAGE,
        digest=D1,
        observed_at=7,
        trigger=Trigger.POLL if pin else Trigger.ROLLBACK,
        changed_at=6,
        correlation_id="c-1",
    )
    return WriteRequest(
        kind=kind,
        repository=URL,
        branch="main",
        mode=mode,
        move=move,
        reference=f"{IMAGE}@{D1 if pin else D0}",
        reason=None if pin else "crash loop",
        previous={TARGET: f"{IMAGE}@{D0}"} if pin else {},
        files=(FileWrite(file=WriteBackFile.model_validate(FILE), targets=(TARGET,)),),
    )


@pytest.mark.parametrize(
    "request_", [_new(WriteKind.PIN), _new(WriteKind.REVERT, WriteMode.PULL_REQUEST)], ids=["pin", "revert"]
)
def test_a_request_this_version_sends_is_read_by_the_version_before(request_: WriteRequest) -> None:
    sent = _sent(request_)
    old = deployed.WriteRequest.model_validate_json(sent["MessageBody"])
    move = request_.move
    assert (old.image, old.digest, old.observed_at, old.trigger, old.correlation_id) == (
        move.image,
        move.digest,
        move.observed_at,
        move.trigger,
        move.correlation_id,
    )
    assert (old.kind, old.mode, old.reference, old.previous, old.targets) == (
        request_.kind,
        request_.mode,
        request_.reference,
        request_.previous,
        request_.targets,
    )
    # the deployed queue's deduplication id was the hash of the body it sent: the same
    assert (
        hashlib.sha256(old.model_dump_json(exclude_none=True).encode()).hexdigest()
        == (sent["MessageDeduplicationId"])
    )
    assert WriteRequest.model_validate_json(old.model_dump_json(exclude_none=True)) == request_.model_copy(
        update={"move": move.model_copy(update={"changed_at": None})}  # the old shape had no changed_at
    )


def test_the_move_alone_would_not_be_read_by_the_version_before() -> None:
    body = json.loads(_sent(_new(WriteKind.PIN))["MessageBody"])
    alone = json.dumps({k: v for k, v in body.items() if k not in FLAT})
    with pytest.raises(ValidationError, match="image"):
        deployed.WriteRequest.model_validate_json(alone)
    assert WriteRequest.model_validate_json(alone) == _new(WriteKind.PIN)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"digest": "sha256:nothex"}, "move.digest"),
        ({"trigger": "sometime"}, "move.trigger"),
        ({"observed_at": -1}, "move.observed_at"),
    ],
)
@pytest.mark.parametrize("shape", ["flat", "move"])
def test_a_bad_move_in_either_shape_is_refused_naming_the_field(
    change: dict[str, Any], field: str, shape: str
) -> None:
    body = json.loads(OLD_REQUESTS[0].values[0])
    if shape == "flat":
        body.update(change)
    else:
        body["move"] = {k: body.pop(k) for k in FLAT} | change
    with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
        WriteRequest.model_validate(body)
