"""A repository whose pack is small and inflates to far more (a blob of one repeated byte: zlib
shrinks it about a thousand times), through Git's own smart HTTP server (``git http-backend`` on
127.0.0.1) and the Git client tagpin ships (dulwich): under the budget of bytes received
(``fetch_budget``) it is stopped by the budget of what the pack inflates to (``inflated_budget``,
both small here) before dulwich inflates it, with an error naming that budget; that repository's
targets are recorded failed with it and the other repositories of the batch are committed. A
repository of manifests within both budgets is read and written as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tagpin.adapters.git.repositories import DulwichRepositories
from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FileKind, WriteBackFile
from tagpin.domain.refs import Digest
from tagpin.ports.git import Author, Branch, GitTooLarge
from tagpin.ports.state import State
from tagpin_local.gitserver import GitServer

from tests.support.git import git_http_server, one_refused_one_written

pytestmark = pytest.mark.integration

WEB = "registry.example.com/team/web"
IMAGE = FollowedKey(f"{WEB}:1.4")
OLD, NEW = "sha256:" + "0" * 64, Digest("sha256:" + "a" * 64)
TARGET = "prod/shop/Deployment/web/app"
FILE = WriteBackFile(path="apps/web/kustomization.yaml", kind=FileKind.KUSTOMIZE)
KUSTOMIZATION = f"images:\n  - name: {WEB}\n    newTag: '1.4'\n    digest: {OLD}\n"
BUDGET, INFLATED = 256 * 1024, 1024 * 1024
BOMB = "a" * 8 * 1024 * 1024  # a pack of about 10 KB
SAYS = "fetch's pack inflates to more than the 1 MiB inflated budget of a fetch"


@pytest.fixture
def server() -> Iterator[GitServer]:
    yield from git_http_server()


def repositories() -> DulwichRepositories:
    return DulwichRepositories(lambda _host: None, timeout=5, fetch_budget=BUDGET, inflated_budget=INFLATED)


def test_a_small_pack_inflating_past_the_budget_stops_with_an_error_naming_it(server: GitServer) -> None:
    url = server.create("org/bomb", {FILE.path: KUSTOMIZATION, "bomb.txt": BOMB})
    repos = repositories()
    with pytest.raises(GitTooLarge, match=f"^{url}: {SAYS}"):
        repos.read(Branch(url, "main"), [FILE.path])
    assert repos.received < BUDGET // 4, repos.received  # the budget of bytes would let it through
    assert repos.kept() == {}  # nothing of it kept


def test_a_repository_within_both_budgets_is_read_and_written(server: GitServer) -> None:
    url = server.create("org/apps", {FILE.path: KUSTOMIZATION, "notes.txt": "x" * 200_000})
    repos = repositories()
    snapshot = repos.read(Branch(url, "main"), [FILE.path])
    assert snapshot.files == {FILE.path: KUSTOMIZATION.encode()}
    repos.write(snapshot, {FILE.path: b"changed\n"}, "tagpin: web", Author("t", "t@x"))
    assert server.show("org/apps", FILE.path) == "changed\n"


def test_a_pack_bomb_fails_its_repositorys_targets_and_the_others_are_committed(
    server: GitServer, state: State
) -> None:
    refused = {FILE.path: KUSTOMIZATION, "bomb.txt": BOMB}
    one_refused_one_written(
        server, state, repositories(), refused, SAYS, image=IMAGE, digest=NEW, file=FILE, target=TARGET
    )
