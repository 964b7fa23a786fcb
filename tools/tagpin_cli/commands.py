"""The CLI's commands: each returns data (dicts and lists) that main renders as a table or JSON."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tagpin import wiring
from tagpin.domain.config import FollowedImage, parse_config
from tagpin.domain.refs import ImageRef
from tagpin.ports.state import TargetStatus


def _ago(epoch_ms: int | None) -> str | None:
    if not epoch_ms:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_ms / 1000))


def followed() -> list[FollowedImage]:
    """Every followed tag with its targets: the configuration's merged with the workloads the
    reconciler found by label (its index in the state table), as the functions see them."""
    return sorted(wiring.followed().values(), key=lambda f: f.image)


def _configured() -> set[str]:
    return {t.id for f in wiring.config().images for t in f.targets}


def status() -> list[dict[str, Any]]:
    """Every followed tag: digest, when last resolved and changed, error; its targets and their state
    and where each comes from (``configuration`` or ``label``)."""
    store = wiring.state()
    configured = _configured()
    rows: list[dict[str, Any]] = []
    for image in followed():
        tag = store.tags.get(image.image)
        targets = store.targets.get_many([t.id for t in image.targets])
        target_rows = []
        for target in image.targets:
            st = targets.get(target.id)
            if st is None:
                condition = "unknown"
            elif st.status in (TargetStatus.FAILED, TargetStatus.GONE):
                condition = st.status.value
            elif tag is not None and st.settled_at(tag.digest):
                condition = "current"
            elif st.status is TargetStatus.PENDING:
                condition = "pending"
            else:
                condition = "behind"
            target_rows.append(
                {
                    "target": target.id,
                    "source": "configuration" if target.id in configured else "label",
                    "condition": condition,
                    "digest": st.digest if st else None,
                    "updated": _ago(st.updated_at) if st else None,
                    "detail": st.detail if st else None,
                }
            )
        rows.append(
            {
                "image": image.image,
                "digest": tag.digest if tag else None,
                "resolved": _ago(tag.resolved_at) if tag else None,
                "changed": _ago(tag.changed_at) if tag else None,
                "error": tag.last_error if tag else None,
                "targets": target_rows,
            }
        )
    return rows


def history(selector: str | None, limit: int = 50) -> list[dict[str, Any]]:
    """The audit trail: of one target (its id), of every target of one image, or of all."""
    ids: list[str] = []
    wanted: str | None = None
    if selector:
        try:
            wanted = ImageRef.parse(selector).tagged
        except ValueError:
            wanted = None
    for image in followed():
        for target in image.targets:
            if selector is None or target.id == selector or image.image == wanted:
                ids.append(target.id)
    if selector and not ids:
        raise LookupError(f"{selector!r} is neither a followed image nor a target id")
    events: list[dict[str, Any]] = []
    for target_id in ids:
        for item in wiring.state().history.of_target(target_id, limit=limit):
            events.append(
                {
                    "at": _ago(item.at),
                    "target": target_id,
                    "digest": item.digest,
                    "status": item.status,
                    "trigger": item.trigger,
                    "detail": item.detail,
                    "previous_image": item.previous_image,
                }
            )
    events.sort(key=lambda e: e["at"] or "", reverse=True)
    return events[:limit]


def resolve(image: str) -> dict[str, Any]:
    """The digest behind a tag, with what the registry answered: for debugging credentials."""
    ref = ImageRef.parse(image)
    access = wiring.registry_access(ref.registry)
    resolution = wiring.registry_client().resolve(ref)
    return {
        "image": str(ref),
        "digest": resolution.digest,
        "pinned": str(resolution.pinned),
        "media_type": resolution.media_type,
        "method": resolution.method,
        "auth": "basic credentials" if access.credentials else "anonymous",
        "insecure": access.insecure,
        "rate_limit": resolution.rate_limit,
    }


def plan(progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """What would roll where right now: the registries' answers against what the clusters run.
    Reads only; changes nothing (no state write, no enqueue, no patch)."""
    from tagpin.adapters.kubernetes.clusters import ClusterConnector
    from tagpin.domain.config import Kind
    from tagpin.ports.workloads import WorkloadError
    from tagpin.usecases.patch import pinned_image

    connector = ClusterConnector(wiring.config, wiring.secret_text)
    rows: list[dict[str, Any]] = []
    for image in followed():
        if progress:
            progress(image.image)
        rows.extend(_plan_image(image, connector, Kind, WorkloadError, pinned_image))
    return rows


def _plan_image(
    followed: FollowedImage, connector: Any, kind_type: Any, workload_error: Any, pinned: Any
) -> list[dict[str, Any]]:
    try:
        digest = wiring.registry_client().resolve(followed.ref).digest
    except Exception as exc:
        return [
            {"image": followed.image, "target": t.id, "action": "unknown", "detail": f"registry: {exc}"}
            for t in followed.targets
        ]
    rows = []
    for target in followed.targets:
        row: dict[str, Any] = {"image": followed.image, "target": target.id, "digest": digest}
        try:
            workload = connector(target.cluster).get(target.namespace, kind_type(target.kind), target.name)
            current = workload.containers.get(target.container) or workload.init_containers.get(
                target.container
            )
            if current is None:
                row |= {"action": "error", "detail": f"no container {target.container!r}"}
            else:
                desired = pinned(current, followed.image, digest)
                row |= {"current": current, "action": "none" if current == desired else "roll", "to": desired}
        except workload_error as exc:
            row |= {"action": "skip", "detail": f"{type(exc).__name__}: {exc}"}
        rows.append(row)
    return rows


def config_validate(path: Path) -> dict[str, Any]:
    config = parse_config(path.read_text(encoding="utf-8"), source=str(path))
    return {
        "file": str(path),
        "valid": True,
        "clusters": len(config.clusters),
        "images": len(config.images),
        "targets": sum(len(f.targets) for f in config.images),
    }


def config_push(path: Path) -> dict[str, Any]:
    from tagpin.adapters.config_source import parameter_value

    summary = config_validate(path)  # never push an invalid document
    name = wiring.setting("config_parameter")
    stored = parameter_value(path.read_text(encoding="utf-8"))
    wiring.aws("ssm").put_parameter(
        Name=name, Value=stored.value, Type="String", Tier=stored.tier, Overwrite=True
    )
    return summary | {"parameter": name, "pushed": True, "tier": stored.tier, "compressed": stored.compressed}


def failed_invocation(body: str) -> dict[str, Any] | None:
    """The summary of a failed asynchronous invocation's record (what Lambda puts on the event bus
    and FailedInvocationsRule files in the dead-letter queue), or None for any other message."""
    from tagpin_local.lambda_runtime import FAILURE_DETAIL_TYPE

    try:
        event = json.loads(body)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("detail-type") != FAILURE_DETAIL_TYPE:
        return None
    detail = event.get("detail") or {}
    context = detail.get("requestContext") or {}
    response = detail.get("responsePayload") or {}
    function = str(context.get("functionArn", "")).split(":function:", 1)[-1].split(":", 1)[0]
    return {
        "function": function[:140],
        "at": str(detail.get("timestamp") or event.get("time", ""))[:40],
        "condition": str(context.get("condition", ""))[:40],
        "error": f"{response.get('errorType', '')}: {response.get('errorMessage', '')}".strip(": ")[:300],
    }


def redrive(dead_letter_queue_url: str, queue_url: str, limit: int | None = None) -> dict[str, Any]:
    """Empty the dead-letter queue: changes and verifications go back to the changes queue, keeping
    group and body (a verification is due at once); the records of failed scheduled runs and ECR
    events are listed and removed (there is nothing to send again: the next run repeats the work).
    Each message is sent before it is deleted, so a failure half-way duplicates at worst (the
    consumer is idempotent) and never loses one."""
    sqs = wiring.aws("sqs")
    moved = 0
    failed: list[dict[str, Any]] = []
    while limit is None or moved + len(failed) < limit:
        batch = sqs.receive_message(
            QueueUrl=dead_letter_queue_url,
            MaxNumberOfMessages=10 if limit is None else max(1, min(10, limit - moved - len(failed))),
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["MessageGroupId", "MessageDeduplicationId"],
            VisibilityTimeout=60,
        ).get("Messages", [])
        if not batch:
            break
        for message in batch:
            record = failed_invocation(message["Body"])
            if record is not None:
                failed.append(record)
            else:
                attributes = message.get("Attributes", {})
                sqs.send_message(
                    QueueUrl=queue_url,
                    MessageBody=message["Body"],
                    MessageGroupId=attributes.get("MessageGroupId", "redrive"),
                    MessageDeduplicationId=f"redrive-{message['MessageId']}",
                )
                moved += 1
            sqs.delete_message(QueueUrl=dead_letter_queue_url, ReceiptHandle=message["ReceiptHandle"])
    return {"moved": moved, "failed_invocations": failed, "from": dead_letter_queue_url, "to": queue_url}
