"""A warm write-back container's Git client (dulwich, in memory) against Git's own smart HTTP server
(``git http-backend`` on 127.0.0.1, tools/tagpin_local/gitserver.py): its memory stays bounded
however many heads and repositories it reads. A person commits between tagpin's pins (each time a
new head, every file changed): the client keeps one head's objects, not every head's it ever
fetched; past ``KEEP`` repositories the least recently read is dropped (read again when needed);
a head unchanged since the last read or push is not fetched again; the pins still land, a write
whose store was dropped since its read included."""

from __future__ import annotations

import gc
import os
import tracemalloc
from collections.abc import Iterator

import pytest
from tagpin.adapters.git.repositories import DulwichRepositories
from tagpin.ports.git import Author, Branch, HeadMoved
from tagpin_local.gitserver import GitServer

from tests.support.git import git_http_server

pytestmark = pytest.mark.integration

AUTHOR = Author("tagpin", "tagpin@users.noreply.invalid")
PIN = "apps/app0/kustomization.yaml"
FILES = 60
HEADS = 6
BLOB = 4_000  # bytes of each file: a head's new blobs are FILES * BLOB


@pytest.fixture
def server() -> Iterator[GitServer]:
    yield from git_http_server()


KEEP = 4  # the stores a client of these tests keeps (the module's own bound is larger)


def files(n: int) -> dict[str, str]:
    """Every file of the repository at a person's ``n``-th commit: all of them new blobs."""
    return {
        f"apps/app{i}/kustomization.yaml": f"images:\n  - name: app{i}\n    newTag: '{n}'\n"
        + os.urandom(BLOB // 2).hex()
        + "\n"
        for i in range(FILES)
    }


def received(repos: DulwichRepositories, branch: Branch) -> tuple[bytes | None, int]:
    """The pinned file as a read finds it, and the bytes it received: the refs listed (under a KB),
    and the pack when it fetches the head (its blobs: more than half of BLOB bytes, compressed)."""
    before = repos.received
    found = repos.read(branch, [PIN]).files[PIN]
    return found, repos.received - before


def team(git: GitServer, i: int) -> str:
    """A small repository: its pin and BLOB bytes of random hex (its pack is over BLOB // 2)."""
    return git.create(f"org/team-{i}", {PIN: f"team {i}\n", "notes.txt": os.urandom(BLOB // 2).hex()})


def test_a_warm_client_keeps_one_heads_objects_however_many_heads_it_read(server: GitServer) -> None:
    url = server.create("org/apps", files(0))
    repos = DulwichRepositories(lambda _host: None, timeout=5)
    branch = Branch(url, "main")
    retained: list[int] = []
    tracemalloc.start()
    try:
        for n in range(1, HEADS + 1):
            server.commit_files("org/apps", files(n), f"a person's commit {n}")
            snapshot = repos.read(branch, [PIN])
            pinned = f"pinned {n}\n".encode()
            commit = repos.write(snapshot, {PIN: pinned}, f"tagpin: pin {n}", AUTHOR)
            assert server.head("org/apps") == commit and server.show("org/apps", PIN) == pinned.decode()
            found, size = received(repos, branch)  # the next invocation: the head is tagpin's commit
            assert found == pinned and size < 1024, f"the head the client pushed is fetched: {size} B"
            gc.collect()
            retained.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert server.log("org/apps")[:2] == [f"tagpin: pin {HEADS}", f"a person's commit {HEADS}"]
    # each head's blobs alone are FILES * BLOB (240 KB): what the client holds does not grow by them
    grown = retained[-1] - retained[0]
    assert grown < FILES * BLOB, f"the client kept {grown} bytes more after {HEADS - 1} more heads"
    # one head's objects: its commit, the root, apps/, a tree and a blob per file
    assert repos.kept() == {(url, "main"): 1 + 2 + 2 * FILES}


def test_repositories_beyond_the_bound_are_dropped_and_read_again(server: GitServer) -> None:
    urls = [team(server, i) for i in range(KEEP + 1)]
    repos = DulwichRepositories(lambda _host: None, timeout=5, keep=KEEP)
    for url in urls:
        repos.read(Branch(url, "main"), [PIN])
    found, size = received(repos, Branch(urls[-1], "main"))  # kept: its head not fetched again
    assert found == f"team {KEEP}\n".encode() and size < 1024, size
    found, size = received(repos, Branch(urls[0], "main"))  # the least recently read: dropped
    assert found == b"team 0\n" and size > BLOB // 2, size
    assert set(repos.kept()) == {(u, "main") for u in [*urls[2:], urls[0]]}  # now the second is


def test_a_write_whose_store_was_dropped_since_its_read_still_lands_or_finds_the_head_moved(
    server: GitServer,
) -> None:
    urls = [team(server, i) for i in range(KEEP + 1)]
    repos = DulwichRepositories(lambda _host: None, timeout=5, keep=KEEP)
    first, moved = (repos.read(Branch(url, "main"), [PIN]) for url in urls[:2])
    for url in urls[2:]:  # the first two repositories' stores dropped
        repos.read(Branch(url, "main"), [PIN])
    assert (urls[0], "main") not in repos.kept()
    commit = repos.write(first, {PIN: b"pinned\n"}, "tagpin: pin", AUTHOR)
    assert server.head("org/team-0") == commit and server.show("org/team-0", PIN) == "pinned\n"
    person = server.commit_files("org/team-1", {PIN: "a person's\n"}, "a person's commit")
    with pytest.raises(HeadMoved, match="main moved from"):
        repos.write(moved, {PIN: b"pinned\n"}, "tagpin: pin", AUTHOR)
    assert server.head("org/team-1") == person and server.show("org/team-1", PIN) == "a person's\n"
