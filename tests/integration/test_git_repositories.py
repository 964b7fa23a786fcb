"""The Git client (dulwich, no ``git`` binary) against Git's own smart HTTP server (``git
http-backend`` from Debian's git, on 127.0.0.1, behind a token check: tools/tagpin_local/gitserver.py):
a pin committed to a kustomization, the same pin twice makes no second commit, a push that lost
the race to a person's commit is re-applied on top of it (the person's commit kept), wrong or
read-only credentials and a server that is down give clear errors and write nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tagpin.adapters.git.repositories import DulwichRepositories
from tagpin.domain.gitops import kustomize
from tagpin.domain.gitops.pins import Pin
from tagpin.ports.git import Author, Branch, GitDenied, GitNotFound, GitUnavailable
from tagpin.usecases.gitcommit import commit_edits
from tagpin_local.gitserver import GitServer

from tests.support.git import git_http_server

WRITE, READ = "ghp_write_0123456789abcdef", "ghp_read_0123456789abcdef"
WRONG = "ghp_wrong_0123456789abcdef"
OLD, NEW = "sha256:" + "0" * 64, "sha256:" + "a" * 64
KUSTOMIZATION = f"""\
resources:
  - deploy.yaml   # the Deployment
images:
  - name: web
    newName: registry.example.com/team/web
    newTag: "1.3"
    digest: {OLD}
"""
PIN = Pin.of("registry.example.com/team/web:1.4", NEW)
AUTHOR = Author("tagpin", "tagpin@users.noreply.invalid")
PATH = "apps/web/kustomization.yaml"


def pin(path: str, text: str) -> str:
    return kustomize.edit(text, PIN).text


@pytest.fixture
def server() -> Iterator[GitServer]:
    yield from git_http_server(tokens={WRITE: "write", READ: "read"})


def repos(token: str) -> DulwichRepositories:
    return DulwichRepositories(lambda host: ("x-access-token", token), timeout=5)


def test_a_pin_is_committed_once(server: GitServer) -> None:
    url = server.create("org/apps", {PATH: KUSTOMIZATION, "README.md": "apps\n"})
    first = server.head("org/apps")
    client = repos(WRITE)
    done = commit_edits(client, Branch(url, "main"), [PATH], pin, "web: 1.4@sha256:aaaa", AUTHOR)
    assert done.commit == server.head("org/apps") and done.parent == first and done.changed == (PATH,)
    assert server.show("org/apps", PATH) == kustomize.edit(KUSTOMIZATION, PIN).text
    assert server.show("org/apps", "README.md") == "apps\n"  # the rest of the tree is kept
    assert server.log("org/apps") == ["web: 1.4@sha256:aaaa", "initial commit"]
    # The same digest again, from a fresh container: nothing to commit, no empty commit
    again = commit_edits(repos(WRITE), Branch(url, "main"), [PATH], pin, "again", AUTHOR)
    assert again.commit is None and server.head("org/apps") == done.commit


def test_a_push_that_lost_the_race_is_reapplied_on_top_of_the_persons_commit(server: GitServer) -> None:
    url = server.create("org/apps", {PATH: KUSTOMIZATION})
    person = KUSTOMIZATION.replace(
        "  - deploy.yaml   # the Deployment\n", "  - deploy.yaml   # the Deployment\n  - hpa.yaml\n"
    )
    calls: list[str] = []

    def racing(path: str, text: str) -> str:
        if not calls:  # a person pushes between tagpin's read and its push
            server.commit_files("org/apps", {PATH: person}, "add the HPA")
        calls.append(text)
        return pin(path, text)

    slept: list[float] = []
    done = commit_edits(
        repos(WRITE), Branch(url, "main"), [PATH], racing, "web: 1.4", AUTHOR, sleep=slept.append
    )
    assert done.attempts == 2 and len(slept) == 1 and slept[0] > 0  # retried after a backoff
    assert calls[1] == person  # the second edit started from the person's file
    assert server.show("org/apps", PATH) == kustomize.edit(person, PIN).text  # both changes kept
    assert server.log("org/apps") == ["web: 1.4", "add the HPA", "initial commit"]


def test_wrong_or_read_only_credentials_are_a_clear_error_and_nothing_is_written(server: GitServer) -> None:
    url = server.create("org/apps", {PATH: KUSTOMIZATION})
    head = server.head("org/apps")
    with pytest.raises(GitDenied) as wrong:
        commit_edits(repos(WRONG), Branch(url, "main"), [PATH], pin, "web: 1.4", AUTHOR)
    assert "refused the credentials (401)" in str(wrong.value) and url in str(wrong.value)
    with pytest.raises(GitDenied) as read_only:
        commit_edits(repos(READ), Branch(url, "main"), [PATH], pin, "web: 1.4", AUTHOR)
    assert "403" in str(read_only.value) and "write access" in str(read_only.value)
    for raised in (wrong, read_only):
        assert not any(t in str(raised.value) for t in (WRITE, READ, WRONG))  # never a credential
    assert server.head("org/apps") == head and server.log("org/apps") == ["initial commit"]
    # fixed credentials: the same request writes it
    assert commit_edits(repos(WRITE), Branch(url, "main"), [PATH], pin, "web: 1.4", AUTHOR).commit is not None


def test_a_server_that_is_down_or_a_missing_branch(server: GitServer) -> None:
    url = server.create("org/apps", {PATH: KUSTOMIZATION})
    with pytest.raises(GitNotFound, match="no branch 'prod'"):
        commit_edits(repos(WRITE), Branch(url, "prod"), [PATH], pin, "x", AUTHOR)
    server.down()
    slept: list[float] = []
    with pytest.raises(GitUnavailable, match=r"fetch failed"):
        commit_edits(
            repos(WRITE), Branch(url, "main"), [PATH], pin, "x", AUTHOR, attempts=3, sleep=slept.append
        )
    assert len(slept) == 2  # tried three times, backing off between
    server.up()  # back on the same port: the same request goes through
    assert commit_edits(repos(WRITE), Branch(url, "main"), [PATH], pin, "x", AUTHOR).commit == server.head(
        "org/apps"
    )
