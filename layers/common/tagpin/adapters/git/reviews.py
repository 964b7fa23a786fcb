"""Pull (merge) requests through the Git host's REST API (``ReviewRequests``; docs/gitops.md,
pull-request mode): GitHub and GitLab, the endpoints below and nothing else.

- GitHub (github.com, GitHub Enterprise Server): ``GET /repos/{owner}/{repo}/pulls?head={owner}:{branch}
  &base={base}&state=open`` finds the request already open for tagpin's branch; without one
  ``POST /repos/{owner}/{repo}/pulls`` with ``title``, ``head``, ``base`` and ``body`` opens it
  (201: its ``number`` and ``html_url``). Authorization: ``Bearer <token>``, the API version header.
- GitLab: ``GET /projects/{id}/merge_requests?source_branch=…&target_branch=…&state=opened``, then
  ``POST /projects/{id}/merge_requests`` with ``source_branch``, ``target_branch``, ``title`` and
  ``description`` (201: ``iid`` and ``web_url``); ``{id}`` is the project's path, URL-encoded.
  Authorization: ``PRIVATE-TOKEN``.

``find`` asks the same lists with ``state=all`` (GitHub: ``state`` open or closed, a merged one
with ``merged_at``; GitLab: ``state`` opened, closed, locked or merged): a request a person closed
without merging is their answer, and is not opened again (``tagpin.usecases.gitreview``).

The search first makes a request delivered again find the open one instead of opening a second;
a create that loses a race (GitHub 422, GitLab 409: one is open for the branch) searches again.
The token is the host's (``GitTokens``, the same secret as the pushes); the API's base URL is
``gitops.hosts.<host>.api_url`` or worked out from the host (``GitHost.api_for``). Answers are
untrusted: at most ``MAX_BODY`` bytes, and only an ``http(s)`` URL and an integer number are
taken from them. 401/403 is ``GitDenied`` (the token forgotten, read again next time), 404
``GitNotFound``, a connection failure, a timeout or a 5xx ``GitUnavailable``; no message carries
the token. urllib3 comes with dulwich in the write-back function's layer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from tagpin.domain.config import GitHost, GitHostKind
from tagpin.ports.git import GitDenied, GitError, GitNotFound, GitUnavailable, PullRequest, ReviewState

MAX_BODY = 1024 * 1024
GITHUB_VERSION = "2022-11-28"
GITHUB_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": GITHUB_VERSION}


class RestReviews:
    def __init__(
        self,
        hosts: Callable[[], Mapping[str, GitHost]],
        token: Callable[[str], tuple[str, str] | None],
        *,
        timeout: float = 10.0,
        forget: Callable[[str], None] | None = None,
    ) -> None:
        import urllib3

        self._hosts = hosts
        self._token = token
        self._forget = forget or (lambda _host: None)
        self._http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout), maxsize=4)

    def find(self, url: str, source: str, target: str) -> PullRequest | None:
        host, api, kind, path = self._where(url)
        if kind is GitHostKind.GITHUB:
            owner = path.partition("/")[0]
            query = urlencode({"head": f"{owner}:{source}", "base": target, "state": "all"})
            found = self._call(host, "GET", f"{_pulls(api, path)}?{query}", GITHUB_HEADERS, None, (200,))
            return _latest(found, "number", "html_url")
        query = urlencode({"source_branch": source, "target_branch": target, "state": "all"})
        found = self._call(host, "GET", f"{_merge_requests(api, path)}?{query}", {}, None, (200,))
        return _latest(found, "iid", "web_url")

    def open(self, url: str, source: str, target: str, title: str, body: str) -> PullRequest:
        host, api, kind, path = self._where(url)
        if kind is GitHostKind.GITHUB:
            return self._github(host, api, path, source, target, title, body)
        return self._gitlab(host, api, path, source, target, title, body)

    def _where(self, url: str) -> tuple[str, str, GitHostKind, str]:
        """The host, its API's base URL, its kind and the repository's path."""
        parts = urlsplit(url)
        host = parts.netloc
        configured = self._hosts().get(host, GitHost())
        api = configured.api_for(host)
        kind = configured.kind_for(host)
        if api is None or kind is GitHostKind.GENERIC:
            raise GitError(f"{host}: pull requests need a GitHub or GitLab host (gitops.hosts.{host}.kind)")
        return host, api, kind, parts.path.strip("/").removesuffix(".git")

    def close(self) -> None:
        self._http.clear()

    # -- GitHub ------------------------------------------------------------------------------

    def _github(
        self, host: str, api: str, path: str, source: str, target: str, title: str, body: str
    ) -> PullRequest:
        owner = path.partition("/")[0]
        pulls, headers = _pulls(api, path), GITHUB_HEADERS

        def find() -> PullRequest | None:
            query = urlencode({"head": f"{owner}:{source}", "base": target, "state": "open"})
            found = self._call(host, "GET", f"{pulls}?{query}", headers, None, (200,))
            return _one(found, "number", "html_url", created=False)

        existing = find()
        if existing is not None:
            return existing
        sent = {"title": title, "head": source, "base": target, "body": body}
        created = self._call(host, "POST", pulls, headers, sent, (201, 422))
        if isinstance(created, dict) and "number" in created:
            return _request(created, "number", "html_url", created=True)
        again = find()  # 422: one was opened for the branch meanwhile
        if again is None:
            raise GitError(f"{host}: the pull request for {source} was refused: {_said(created)}")
        return again

    # -- GitLab ------------------------------------------------------------------------------

    def _gitlab(
        self, host: str, api: str, path: str, source: str, target: str, title: str, body: str
    ) -> PullRequest:
        requests = _merge_requests(api, path)

        def find() -> PullRequest | None:
            query = urlencode({"source_branch": source, "target_branch": target, "state": "opened"})
            found = self._call(host, "GET", f"{requests}?{query}", {}, None, (200,))
            return _one(found, "iid", "web_url", created=False)

        existing = find()
        if existing is not None:
            return existing
        sent = {"source_branch": source, "target_branch": target, "title": title, "description": body}
        created = self._call(host, "POST", requests, {}, sent, (201, 409))
        if isinstance(created, dict) and "iid" in created:
            return _request(created, "iid", "web_url", created=True)
        again = find()  # 409: one was opened for the branch meanwhile
        if again is None:
            raise GitError(f"{host}: the merge request for {source} was refused: {_said(created)}")
        return again

    # -- HTTP --------------------------------------------------------------------------------

    def _call(
        self,
        host: str,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: Mapping[str, Any] | None,
        expected: tuple[int, ...],
    ) -> Any:
        import urllib3

        sent = {"User-Agent": "tagpin", "Accept": "application/json", **headers}
        credentials = self._token(host)
        if credentials is not None:
            kind = self._hosts().get(host, GitHost()).kind_for(host)
            if kind is GitHostKind.GITLAB:
                sent["PRIVATE-TOKEN"] = credentials[1]
            else:
                sent["Authorization"] = f"Bearer {credentials[1]}"
        data = None
        if body is not None:
            data, sent["Content-Type"] = json.dumps(body).encode(), "application/json"
        where = url.split("?", 1)[0]
        try:
            answer = self._http.request(
                method, url, body=data, headers=sent, preload_content=False, redirect=False
            )
            try:
                raw = answer.read(MAX_BODY + 1)
            finally:
                answer.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            raise GitUnavailable(f"{host}: {method} {where} failed: {type(exc).__name__}") from None
        status = answer.status
        if status in (401, 403):
            self._forget(host)
            raise GitDenied(
                f"{host}: the API refused the token ({status}) for {method} {where}: it needs to open "
                "pull (merge) requests on the repository (docs/gitops.md, credentials)"
            )
        if status == 404:
            raise GitNotFound(
                f"{host}: {where}: no such repository or project (404), or the token cannot see it"
            )
        if status >= 500 or status == 429:
            raise GitUnavailable(f"{host}: {method} {where} answered {status}")
        if len(raw) > MAX_BODY:
            raise GitError(f"{host}: {method} {where}: the answer is larger than {MAX_BODY} bytes")
        try:
            value = json.loads(raw) if raw else None
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            raise GitError(f"{host}: {method} {where} answered {status} with no JSON") from None
        if status not in expected:
            raise GitError(f"{host}: {method} {where} answered {status}: {_said(value)}")
        return value


def _one(found: Any, number: str, url: str, *, created: bool) -> PullRequest | None:
    if not isinstance(found, list):
        raise GitError("the API's list of requests is not a list")
    return _request(found[0], number, url, created=created) if found else None


def _pulls(api: str, path: str) -> str:
    owner, _, repo = path.partition("/")
    return f"{api}/repos/{quote(owner, safe='')}/{quote(repo, safe='')}/pulls"


def _merge_requests(api: str, path: str) -> str:
    return f"{api}/projects/{quote(path, safe='')}/merge_requests"


def _latest(found: Any, number: str, url: str) -> PullRequest | None:
    """The open request of a list in any state, else the one with the highest number."""
    if not isinstance(found, list):
        raise GitError("the API's list of requests is not a list")
    requests = [_request(item, number, url, created=False) for item in found[:100]]
    requests.sort(key=lambda r: (r.state is ReviewState.OPEN, r.number))
    return requests[-1] if requests else None


def _state(value: dict[str, Any]) -> ReviewState:
    """GitHub: ``open`` or ``closed``, merged when ``merged_at`` is set; GitLab: ``opened``,
    ``closed``, ``locked`` (being merged: still open until it is) or ``merged``. Anything else is
    taken as open: only a request closed without a merge declines."""
    said = value.get("state")
    if said == "merged" or value.get("merged_at"):
        return ReviewState.MERGED
    return ReviewState.CLOSED if said == "closed" else ReviewState.OPEN


def _request(value: Any, number: str, url: str, *, created: bool) -> PullRequest:
    if not isinstance(value, dict):
        raise GitError(f"the API's request has no {number} and {url}")
    n, link = value.get(number), value.get(url)
    if not isinstance(n, int) or not isinstance(link, str) or urlsplit(link).scheme not in ("http", "https"):
        raise GitError(f"the API's request has no {number} and {url}")
    return PullRequest(number=n, url=link[:2000], created=created, state=_state(value))


def _said(value: Any) -> str:
    """What the API said about a refusal, bounded (its ``message`` or ``errors``)."""
    if isinstance(value, dict):
        text = value.get("message") or value.get("errors") or value.get("error") or ""
        return " ".join(str(text).split())[:300]
    return ""
