"""Drive: the world the scenarios run in, set up without being measured.

The tags are pushed (one manifest under many tags), N labelled, pinned Deployments are created, a
first reconcile discovers them (index + tag states, the real path), and each target's state is
recorded as applied through the real state repositories (``claim_target`` + ``finish_target``,
what the consumer does) instead of N consumer runs. Where the first reconcile is not run (above
``--reconcile-max``), the index and tag states it would write are seeded through the same calls.

Per-target and per-tag state is written by the real repositories for the first two only; the items
they wrote for the first are then copied for every other one with its names put in (``Cloner``), in
batches of 25, after checking that the copy made for the second equals what the real call wrote for
it (if not, every one goes through the real calls, slowly, and the bench says so); a tag's entry in
its shard's settled-digest item is merged into that item, one write per shard. At 10,000 tags
that is about 1,200 BatchWriteItem calls and 64 PutItem instead of 70,000 conditional updates
against moto.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import yaml

from .awscalls import item_size
from .clone import Cloner

TAGS_PER_REPO = 100
NAMESPACES = 20
FOLLOW = {"tagpin.dev/follow": "true"}


def images(host: str, n: int) -> list[str]:
    return [f"{host}/bench/r{i // TAGS_PER_REPO:03d}:t{i % TAGS_PER_REPO:03d}" for i in range(n)]


def push_tags(url: str, n: int) -> str:
    """One manifest per repository, put under its tags (fast); returns the digest (the same everywhere)."""
    from tagpin_local.oci import OCI_MANIFEST, _image_manifest, put_manifest, upload_blob

    repos = (n + TAGS_PER_REPO - 1) // TAGS_PER_REPO
    with httpx.Client(timeout=30) as http:
        layer = None
        bodies: dict[int, bytes] = {}
        for r in range(repos):
            layer = upload_blob(http, url, f"bench/r{r:03d}", b"tagpin cost bench layer")
            bodies[r] = _image_manifest(
                http, url, f"bench/r{r:03d}", layer, {"os": "linux", "architecture": "amd64"}
            )

    def put(indices: range) -> set[str]:
        with httpx.Client(timeout=30) as http:
            return {
                put_manifest(
                    http,
                    url,
                    f"bench/r{i // TAGS_PER_REPO:03d}",
                    f"t{i % TAGS_PER_REPO:03d}",
                    bodies[i // TAGS_PER_REPO],
                    media_type=OCI_MANIFEST,
                )
                for i in indices
            }

    with ThreadPoolExecutor(8) as pool:
        digests = set().union(*pool.map(put, [range(i, min(n, i + 250)) for i in range(0, n, 250)]))
    assert len(digests) == 1, digests
    return digests.pop()


def workload_name(image: str) -> str:
    repo, tag = image.rsplit("/", 1)[-1].split(":")
    return f"{repo}-{tag}"


def seed_target_states(stack: Any, tags: list[str], digest: str) -> bool:
    """Every target applied at ``digest`` as the real state repositories write it (what the consumer
    writes): through them for the first two, copied for the rest (``Cloner``). Whether copied."""
    from tagpin.adapters.dynamodb import dynamodb_state
    from tagpin.domain.channels import FollowedKey
    from tagpin.domain.messages import Trigger
    from tagpin.domain.refs import Digest
    from tagpin.ports.state import TargetStatus

    store = dynamodb_state(stack.client("dynamodb"), "tagpin-state")
    now = time.time_ns() // 1_000_000

    def seed(i: int) -> None:
        target = target_id(i, tags[i])
        assert store.targets.claim(target, FollowedKey(tags[i]), Digest(digest), now, Trigger.RECONCILE, now)
        applied = TargetStatus.APPLIED
        assert store.targets.finish(target, Digest(digest), applied, now, trigger=Trigger.RECONCILE)

    cloner = Cloner(stack, "target states")
    cloner.run(seed, [(tags[i], target_id(i, tags[i])) for i in range(len(tags))])
    return cloner.cloned


def target_id(i: int, image: str) -> str:
    return f"local/team{i % NAMESPACES}/Deployment/{workload_name(image)}/app"


def seed_index(stack: Any, tags: list[str], digest: str) -> bool:
    """The index entries and tag states the first reconcile writes, through the real state
    repositories (the tag states copied for all but two, ``Cloner``). Whether copied."""
    from tagpin.adapters.dynamodb import dynamodb_state
    from tagpin.adapters.dynamodb.digests import digest_key
    from tagpin.domain.channels import FollowedKey
    from tagpin.domain.messages import Trigger
    from tagpin.domain.refs import Digest
    from tagpin.ports.state import IndexEntry

    store = dynamodb_state(stack.client("dynamodb"), "tagpin-state")
    now = time.time_ns() // 1_000_000
    entries = [
        IndexEntry(
            image=FollowedKey(image),
            target_id=target_id(i, image),
            cluster="local",
            namespace=f"team{i % NAMESPACES}",
            kind="Deployment",
            name=workload_name(image),
            container="app",
            seen_at=now,
        )
        for i, image in enumerate(tags)
    ]
    # one update of them all, as the first reconcile makes it: each shard summarised once (in parts
    # side by side, each shard was summarised once per part, while other parts wrote: moto's race)
    store.index.update(entries, [])
    # each tag's own item and its entry in its shard's settled-digest item (a move's tombstone); the
    # second one checked in another repository (so another shard) where there is one
    order = [0, *([TAGS_PER_REPO] if len(tags) > TAGS_PER_REPO else [])]
    order += [i for i in range(1, len(tags)) if i not in order]

    def shared_key(i: int) -> tuple[str, str]:
        found = digest_key(FollowedKey(tags[order[i]]))
        return found["pk"]["S"], found["sk"]["S"]

    cloner = Cloner(stack, "tag states")
    cloner.run(
        lambda i: store.tags.record(FollowedKey(tags[order[i]]), Digest(digest), now, Trigger.RECONCILE),
        [(tags[i],) for i in order],
        shared_key,
    )
    return cloner.cloned


def table_bytes(stack: Any) -> dict[str, int]:
    db = stack.client("dynamodb")
    sizes: dict[str, int] = {}
    for table in ("tagpin-state", "tagpin-idempotency"):
        total = 0
        for page in db.get_paginator("scan").paginate(TableName=table):
            total += sum(item_size(i) + 100 for i in page["Items"])  # + 100 B per item: DynamoDB overhead
        sizes[table] = total
    return sizes


def explicit_config_bytes(host: str, n: int) -> int:
    """Size of the configuration listing the same N targets explicitly (no labels)."""
    document = {
        "clusters": {"local": {"kubeconfig": {"secret": "tagpin/clusters/local", "context": "local"}}},
        "registries": {host: {"insecure": True}},
        "images": [
            {
                "image": image,
                "targets": [
                    {
                        "cluster": "local",
                        "namespace": f"team{i % NAMESPACES}",
                        "kind": "Deployment",
                        "name": workload_name(image),
                        "container": "app",
                    }
                ],
            }
            for i, image in enumerate(images(host, n))
        ],
    }
    return len(yaml.safe_dump(document, sort_keys=False).encode())


def distribution_notification(host: str, image: str, digest: str) -> bytes:
    repository, tag = image.removeprefix(host + "/").rsplit(":", 1)
    event = {
        "id": f"cost-{time.time_ns()}",
        "timestamp": "2026-01-01T00:00:00Z",
        "action": "push",
        "target": {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest,
            "repository": repository,
            "tag": tag,
        },
        "request": {"host": host, "method": "PUT"},
    }
    return json.dumps({"events": [event]}).encode()
