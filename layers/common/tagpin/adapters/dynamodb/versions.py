"""``VERSIONS#<registry/repository>`` / ``STATE``: the versions of a repository marked bad.

Attribute ``bad``: a map of tag -> ``{digest, reason, at}``. One item per repository, shared by
every version channel of it ("never chosen again by any channel"), read with BatchGetItem like the
tags' items. Written when a channel's rollout is rolled back (the consumer, verifying) or a person
holds versions back (``tagpin downgrade``); an entry is removed only by a person (``tagpin
clear``). Rare writes: a map attribute set in place, the item created by the first one.
"""

from __future__ import annotations

from tagpin.adapters.dynamodb.table import TEXT_LIMIT, VERSIONS, Item, N, S, Table, digest_at, key, text
from tagpin.ports.state import BadVersion

CREATE_ATTEMPTS = 2


def _bad(item: Item) -> dict[str, BadVersion]:
    found: dict[str, BadVersion] = {}
    for tag, value in (item.get("bad", {}).get("M") or {}).items():
        entry = value.get("M") or {}
        found[tag] = BadVersion(
            tag=tag,
            digest=digest_at(entry),
            reason=text(entry, "reason") or "",
            at=int((entry.get("at") or {}).get("N", "0")),
        )
    return found


def marked_tags(table: Table, repository: str) -> list[str]:
    """The tags of ``repository``'s versions marked bad, read consistently (a channel's head
    compares with them before it moves: ``heads.py``)."""
    item = table.get(key(VERSIONS + repository)) or {}
    return list(_bad(item))


class DynamoVersions:
    def __init__(self, table: Table) -> None:
        self._table = table

    def bad(self, repositories: list[str]) -> dict[str, dict[str, BadVersion]]:
        keys = [key(VERSIONS + r) for r in dict.fromkeys(repositories)]
        found: dict[str, dict[str, BadVersion]] = {}
        for item in self._table.batch_get(keys, consistent=False) if keys else []:
            if bad := _bad(item):
                found[(text(item, "pk") or "").removeprefix(VERSIONS)] = bad
        return found

    def mark_bad(self, repository: str, version: BadVersion) -> None:
        entry = {
            "M": {
                "digest": S(version.digest),
                "reason": S(version.reason, TEXT_LIMIT),
                "at": N(version.at),
            }
        }
        item_key = key(VERSIONS + repository)
        for _attempt in range(CREATE_ATTEMPTS):
            if (
                self._table.update(
                    item_key,
                    "SET bad.#tag = :v",
                    condition="attribute_exists(bad)",
                    names={"#tag": version.tag},
                    values={":v": entry},
                )
                is not None
            ):
                return
            if self._table.put(
                {**item_key, "bad": {"M": {version.tag: entry}}}, condition="attribute_not_exists(pk)"
            ):
                return
        raise RuntimeError(f"could not mark {repository}:{version.tag} bad")

    def clear(self, repository: str, tag: str) -> bool:
        return (
            self._table.update(
                key(VERSIONS + repository),
                "REMOVE bad.#tag",
                condition="attribute_exists(bad.#tag)",
                names={"#tag": tag},
            )
            is not None
        )
