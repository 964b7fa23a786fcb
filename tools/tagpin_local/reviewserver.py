"""A stand-in for GitHub's and GitLab's pull (merge) request APIs, for the tests only: it is not
GitHub or GitLab. It serves on 127.0.0.1 exactly the endpoints tagpin's adapter uses
(``tagpin.adapters.git.reviews``), with the fields it reads and sends as the real APIs document
them, backed by the repositories of the real Git server (:mod:`tagpin_local.gitserver`):

- GitHub: ``GET /repos/{owner}/{repo}/pulls?head={owner}:{branch}&base=…&state=open|closed|all``
  (a list; ``state`` open or closed, a merged one closed with ``merged_at``)
  and ``POST /repos/{owner}/{repo}/pulls`` (``title``, ``head``, ``base``, ``body``; 201 with
  ``number`` and ``html_url``; 422 when the head branch does not exist or a request is already open
  for it). ``Authorization: Bearer <token>``. Configure ``api_url: <url>``.
- GitLab: ``GET /api/v4/projects/{id}/merge_requests?source_branch=…&target_branch=…&state=…``
  (opened, closed, merged or all, the default) and ``POST /api/v4/projects/{id}/merge_requests``
  (``source_branch``, ``target_branch``, ``title``, ``description``; 201 with ``iid`` and
  ``web_url``; 409 when one is open for the branch). ``PRIVATE-TOKEN: <token>``. Configure
  ``api_url: <url>/api/v4``.

Tokens are the Git server's (``write`` ones may open requests); no token or an unknown one is 401,
a ``read`` one 403, a repository the Git server does not have 404. ``merge(name, number)``
fast-forwards the base branch to the request's head, as a person's merge would (a merge commit
is not needed for what the tests show); ``close`` closes one unmerged, as a person who declines it;
``reopen`` opens it again. ``posts`` counts the requests opened.
"""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from tagpin_local.gitserver import GitServer


@dataclass
class Review:
    repository: str  # the Git server's name, e.g. org/apps
    number: int
    source: str
    target: str
    title: str
    body: str
    state: str = "open"


class ReviewServer:
    def __init__(self, git: GitServer) -> None:
        self.git = git
        self.reviews: list[Review] = []
        self.posts = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                stand_in._handle(self, "GET")

            def do_POST(self) -> None:
                stand_in._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="review-server", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def merge(self, name: str, number: int) -> str:
        """Fast-forward the request's base branch to its head (a person merges it); the commit."""
        (review,) = [r for r in self.reviews if r.repository == name and r.number == number]
        head = self.git.head(name, review.source)
        assert head is not None
        subprocess.run(
            ["git", "--git-dir", str(self.git.path(name)), "update-ref", f"refs/heads/{review.target}", head],
            check=True,
            capture_output=True,
        )
        review.state = "merged"
        return head

    def close(self, name: str, number: int) -> None:
        """Close the request without merging it (a person declines it)."""
        (review,) = [r for r in self.reviews if r.repository == name and r.number == number]
        review.state = "closed"

    def reopen(self, name: str, number: int) -> None:
        """Reopen a request closed without a merge."""
        (review,) = [r for r in self.reviews if r.repository == name and r.number == number]
        assert review.state == "closed"
        review.state = "open"

    # -- HTTP ---------------------------------------------------------------------------------

    def _handle(self, http: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(http.path)
        segments = parts.path.strip("/").split("/")
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if len(segments) == 4 and segments[0] == "repos" and segments[3] == "pulls":
            kind, name = "github", f"{unquote(segments[1])}/{unquote(segments[2])}"
            token = (http.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        elif (
            segments[:3] == ["api", "v4", "projects"]
            and len(segments) == 5
            and segments[4] == "merge_requests"
        ):
            kind, name = "gitlab", unquote(segments[3])
            token = (http.headers.get("PRIVATE-TOKEN") or "").strip()
        else:
            return _answer(http, 404, {"message": "Not Found"})
        access = self.git.tokens.get(token)
        if access is None:
            return _answer(http, 401, {"message": "Bad credentials"})
        if access != "write":
            return _answer(http, 403, {"message": "Resource not accessible by personal access token"})
        if not self.git.path(name).exists():
            return _answer(http, 404, {"message": "Not Found"})
        if method == "GET":
            return _answer(http, 200, [self._shown(kind, r) for r in self._open(name, kind, query)])
        length = min(int(http.headers.get("Content-Length") or 0), 1024 * 1024)
        sent: dict[str, Any] = json.loads(http.rfile.read(length) or b"{}")
        source, target = (
            (sent.get("head"), sent.get("base"))
            if kind == "github"
            else (sent.get("source_branch"), sent.get("target_branch"))
        )
        if not isinstance(source, str) or not isinstance(target, str) or self.git.head(name, source) is None:
            return _answer(
                http, 422, {"message": "Validation Failed", "errors": [{"field": "head", "code": "invalid"}]}
            )
        with self._lock:
            if any(r.repository == name and r.source == source and r.state == "open" for r in self.reviews):
                if kind == "github":
                    return _answer(http, 422, {"message": f"A pull request already exists for {source}."})
                return _answer(
                    http,
                    409,
                    {"message": ["Another open merge request already exists for this source branch"]},
                )
            review = Review(
                name,
                len([r for r in self.reviews if r.repository == name]) + 1,
                source,
                target,
                str(sent.get("title") or ""),
                str(sent.get("body") or sent.get("description") or ""),
            )
            self.reviews.append(review)
            self.posts += 1
        return _answer(http, 201, self._shown(kind, review))

    def _open(self, name: str, kind: str, query: dict[str, str]) -> list[Review]:
        if kind == "github":
            source = query.get("head", "").partition(":")[2]
            target, wanted = query.get("base"), query.get("state", "open")
        else:
            source, target = query.get("source_branch", ""), query.get("target_branch")
            wanted = (
                "open" if query.get("state") == "opened" else query.get("state", "all")
            )  # GitLab's default
        return [
            r
            for r in self.reviews
            if r.repository == name
            and r.source == source
            and (target is None or r.target == target)
            and wanted in ("all", r.state, "closed" if kind == "github" and r.state == "merged" else "")
        ]

    def _shown(self, kind: str, review: Review) -> dict[str, Any]:
        if kind == "github":  # open or closed; a merged one is closed, with merged_at
            page = f"{self.git.url}/{review.repository}/pull/{review.number}"
            merged = "2026-01-01T00:00:00Z" if review.state == "merged" else None
            state = "open" if review.state == "open" else "closed"
            return {
                "number": review.number,
                "html_url": page,
                "state": state,
                "merged_at": merged,
                "title": review.title,
            }
        page = f"{self.git.url}/{review.repository}/-/merge_requests/{review.number}"
        state = "opened" if review.state == "open" else review.state
        return {"iid": review.number, "web_url": page, "state": state, "title": review.title}


def _answer(http: BaseHTTPRequestHandler, status: int, value: Any) -> None:
    body = json.dumps(value).encode()
    http.send_response(status)
    http.send_header("Content-Type", "application/json")
    http.send_header("Content-Length", str(len(body)))
    http.end_headers()
    http.wfile.write(body)
