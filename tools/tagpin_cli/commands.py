"""The CLI's commands: each returns data (dicts and lists) that main renders as a table or JSON."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tagpin import wiring
from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import ConfigError, FollowedImage, parse_config
from tagpin.domain.refs import Digest, ImageRef
from tagpin.ports.state import TagState, TargetNote, TargetState, TargetStatus
from tagpin.usecases.console_views import SHOWN

from tagpin_cli.plans import plan

__all__ = ["plan"]  # the commands below, and plan (tagpin_cli.plans)


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
    and where each comes from (``configuration`` or ``label``). A target a trust gate refused the
    tag's digest for is ``blocked``, with the gate's reason as its detail."""
    store = wiring.state()
    configured = _configured()
    rows: list[dict[str, Any]] = []
    for image in followed():
        tag = store.tags.get(image.image)
        targets = store.targets.get_many([t.id for t in image.targets])
        waiting = wiring.approvals().awaiting_targets(image)
        target_rows = []
        for target in image.targets:
            st = targets.get(target.id)
            condition = _condition(target.id, st, tag, waiting)
            detail = st.detail if st else None
            if condition in ("unknown", "behind") and tag is not None:
                reason = _blocked(target.id, tag.digest)
                if reason is not None:
                    condition, detail = "blocked", reason
            target_rows.append(
                {
                    "target": target.id,
                    "source": "configuration" if target.id in configured else "label",
                    "condition": condition,
                    "digest": st.digest if st else None,
                    "updated": _ago(st.updated_at) if st else None,
                    "detail": detail,
                }
            )
        channel = (
            {}
            if image.policy is None
            else {"policy": image.policy.text, "version": tag.version if tag else None}
        )
        rows.append(
            {
                "image": image.image,
                **channel,
                "digest": tag.digest if tag else None,
                "resolved": _ago(tag.resolved_at) if tag else None,
                "changed": _ago(tag.changed_at) if tag else None,
                "error": tag.last_error if tag else None,
                "targets": target_rows,
            }
        )
    return rows


def _condition(target_id: str, st: TargetState | None, tag: TagState | None, waiting: frozenset[str]) -> str:
    if st is None:
        return "awaiting-approval" if target_id in waiting else "unknown"
    if st.status in SHOWN:
        return st.status.value
    if tag is not None and st.settled_at(tag.digest):
        return "current"
    if target_id in waiting:
        return "awaiting-approval"
    if st.status is TargetStatus.PENDING:
        return "pending"
    return "behind"


def _blocked(target_id: str, digest: str, depth: int = 20) -> str | None:
    """Why a trust gate refused ``digest`` for the target (its ``blocked`` note, written once per
    target and digest), or None: the target's state keeps what it last ran and its detail."""
    for entry in wiring.state().history.of_target(target_id, limit=depth):
        if entry.digest == digest and entry.status == TargetNote.BLOCKED:
            return entry.detail or "blocked by a trust gate"
    return None


HISTORY_READERS = 10  # trails read at once: botocore keeps 10 connections per client (more would wait)


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
            if selector is None or target.id == selector or image.image in (wanted, selector):
                ids.append(target.id)
    if selector and not ids:
        raise LookupError(f"{selector!r} is neither a followed image nor a target id")
    events: list[dict[str, Any]] = []
    # One Query per target (newest first, ``limit`` each): side by side, since each waits on a round
    # trip (without a selector, every followed target's; an index of every target's recent history
    # would make it one read, at a write per history item: not made).
    history = wiring.state().history
    with ThreadPoolExecutor(max_workers=HISTORY_READERS) as pool:
        trails = list(pool.map(lambda target_id: history.of_target(target_id, limit=limit), ids))
    for target_id, trail in zip(ids, trails, strict=True):
        for item in trail:
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


def resolve(image: str, policy: str | None = None) -> dict[str, Any]:
    """The digest behind a tag, with what the registry answered: for debugging credentials. With a
    version ``policy``, ``image`` is a repository: its tags are listed, the candidates and the head
    the policy chooses are shown (and why the newer tags were rejected), and the head is resolved."""
    from tagpin.domain.versions import VersionPolicy, select_head

    ref = ImageRef.parse(image)
    # what was typed is checked before the stack or a registry is asked anything
    parsed = None if policy is None else VersionPolicy.parse(policy)
    if parsed is not None and ":" in image.rsplit("/", 1)[-1]:
        raise ValueError(f"{image!r}: with --policy, give the repository without a tag")
    access = wiring.registry_access(ref.registry)
    extra: dict[str, Any] = {}
    if parsed is not None:
        listing = wiring.registry_client().list_tags(ref)
        selection = select_head(parsed, listing.tags, limit=20)
        extra = {
            "policy": parsed.text,
            "tags_listed": len(listing.tags),
            "listing": f"{listing.pages} page(s), {listing.requests} request(s), {listing.end}",
            "candidates": _candidates(parsed, listing.tags),
            "head": selection.head_tag,
            "rejected": [f"{r.tag}: {r.reason}" for r in selection.rejected],
        }
        if selection.head_tag is None:
            return {"image": f"{ref.name}", **extra}
        ref = ref.with_tag(selection.head_tag)
    resolution = wiring.registry_client().resolve(ref)
    return {
        "image": str(ref),
        **extra,
        "digest": resolution.digest,
        "pinned": str(resolution.pinned),
        "media_type": resolution.media_type,
        "method": resolution.method,
        "auth": "basic credentials" if access.credentials else "anonymous",
        "insecure": access.insecure,
        "rate_limit": resolution.rate_limit,
    }


def _candidates(policy: Any, tags: tuple[str, ...], limit: int = 10) -> list[str]:
    """The versions the policy allows, newest first (at most ``limit``)."""
    allowed = [v for tag in tags if (v := policy.version(tag)) is not None and policy.screen(v) is None]
    allowed.sort(key=lambda v: v.rank, reverse=True)
    return [v.tag for v in allowed[:limit]]


def _who() -> str:
    """Who runs the CLI, for the audit trail: the AWS identity, else the local user."""
    import getpass

    try:
        return str(wiring.aws("sts").get_caller_identity()["Arn"])
    except Exception:
        return getpass.getuser()


def _channel(key: str) -> FollowedImage:
    found = wiring.followed().get(FollowedKey(key)) if len(key) >= 3 else None
    if found is None or found.channel_key is None:
        channels = [f.image for f in followed() if f.channel_key is not None]
        raise LookupError(
            f"{key!r} is not a followed version channel (followed: {', '.join(channels) or 'none'})"
        )
    return found


def downgrade(key: str, version: str) -> dict[str, Any]:
    """Move a version channel's head down to ``version`` (recorded; the newer versions are held
    back until cleared)."""
    done = wiring.downgrades().downgrade(_channel(key), version, _who())
    return {
        "channel": done.key,
        "version": done.tag,
        "digest": done.digest,
        "held_back": list(done.held_back),
    }


def _image_of(selector: str) -> FollowedKey:
    """The followed image (tag or channel key) a selector names: the image itself, or a target."""
    for image in followed():
        if image.image == selector or any(t.id == selector for t in image.targets):
            return image.image
    try:
        tagged = FollowedKey.of(ImageRef.parse(selector))
    except ValueError:
        tagged = None
    if tagged is not None and any(image.image == tagged for image in followed()):
        return tagged
    raise LookupError(f"{selector!r} is neither a followed image nor a target id")


def decide(selector: str, approve: bool, digest: str | None = None) -> dict[str, Any]:
    """Approve or reject the wave of an image (or of a target's image) waiting for a person."""
    from tagpin.usecases.approvals import Via

    wanted = None if digest is None else Digest(digest)  # a malformed one: before the stack is asked
    decided = wiring.approvals().decide(_image_of(selector), approve, _who(), Via.CLI, wanted)
    return {
        "image": decided.image,
        "digest": decided.digest,
        "wave": decided.wave,
        "decision": decided.decision.value,
        "detail": decided.detail,
    }


def hold(target: str, until: str | None = None) -> dict[str, Any]:
    """Hold a target where it is (every digest) until released, or until ``until`` (ISO 8601)."""
    from datetime import datetime

    until_ms = None
    if until is not None:
        try:
            moment = datetime.fromisoformat(until.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"--until {until!r}: not an ISO 8601 time, e.g. 2026-12-01T09:00:00Z") from None
        if moment.tzinfo is None:
            raise ValueError(f"--until {until!r}: give a time zone, e.g. 2026-12-01T09:00:00Z")
        until_ms = int(moment.timestamp() * 1000)
        if until_ms <= time.time() * 1000:
            raise ValueError(f"--until {until!r} is in the past")
    held = wiring.holds().hold(target, _who(), until_ms)
    return {"target": target, "held": held, "until": until}


def release(target: str) -> dict[str, Any]:
    """End a target's hold (set by `tagpin hold`, or by the reconciler after a person's change)
    and apply its tag's digest again now."""
    done = wiring.holds().release(target, _who())
    return {"target": target, "released": done.released, "healing": done.healing}


def clear(key: str, version: str) -> dict[str, Any]:
    """Let the channels of a repository choose ``version`` again (it was marked bad)."""
    channel = _channel(key)
    cleared = wiring.downgrades().clear(channel, version, _who(), siblings=followed())
    return {"channel": key, "version": version, "cleared": cleared}


def _document(path: Path) -> str:
    """A configuration file's text; one that is not UTF-8 is an invalid configuration."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def config_validate(path: Path) -> dict[str, Any]:
    return _validated(path, _document(path))


def _validated(path: Path, document: str) -> dict[str, Any]:
    config = parse_config(document, source=str(path), storing=True)
    return {
        "file": str(path),
        "valid": True,
        "clusters": len(config.clusters),
        "images": len(config.images),
        "targets": sum(len(f.targets) for f in config.images),
    }


def config_push(path: Path) -> dict[str, Any]:
    from tagpin.adapters.config_source import parameter_value

    document = _document(path)  # read once: what is pushed is what was validated
    summary = _validated(path, document)  # never push an invalid document
    name = wiring.setting("config_parameter")
    stored = parameter_value(document)
    wiring.aws("ssm").put_parameter(
        Name=name, Value=stored.value, Type="String", Tier=stored.tier, Overwrite=True
    )
    return summary | {"parameter": name, "pushed": True, "tier": stored.tier, "compressed": stored.compressed}


def redrive(dead_letter_queue_url: str, queue_url: str, limit: int | None = None) -> dict[str, Any]:
    """Empty the dead-letter queue (``tagpin.usecases.deadletters``, the console's Redrive too):
    changes and verifications go back to the changes queue, keeping group and body; the records of
    failed scheduled runs and ECR events are listed and removed."""
    from dataclasses import asdict

    done = wiring.dead_letters(dead_letter_queue_url, queue_url).redrive(limit)
    return {
        "moved": done.moved,
        "failed_invocations": [asdict(run) for run in done.failed_runs],
        "from": dead_letter_queue_url,
        "to": queue_url,
    }
