"""A real Git server on 127.0.0.1 for tests, benchmarks and the local stack: Git's own smart HTTP
(``git http-backend`` from Debian's ``git``, run as a CGI program per request) behind a small
threaded HTTP server that checks tokens and injects faults.

- Repositories are bare repositories under a temporary root: ``create("org/apps")`` makes one
  (``http.receivepack`` on, so pushes are accepted) and returns its URL
  (``http://127.0.0.1:PORT/org/apps.git``).
- Authentication as GitHub and GitLab accept it: ``Authorization: Basic`` with any user name and
  the token as the password (or ``Bearer <token>``). ``tokens`` maps each token to ``read`` or
  ``write``; no credentials or an unknown token answer 401 with a ``WWW-Authenticate`` challenge,
  a read token that pushes answers 403. ``tokens`` empty: anonymous access, pushes included.
- Faults, as ``tagpin_local.faultproxy`` has them: ``fail(status, times, match)`` answers
  ``status`` to the next ``times`` requests whose path contains ``match``; ``delay`` holds each
  request that long before answering; ``down()`` closes the listening socket (connections are
  refused) until ``up()`` opens it again on the same port. ``refuse(reason, times, fatal)``
  answers the next pushes as a server that refuses them, whatever the reason's bytes: receive-pack's
  report ``ng <ref> <reason>`` (``fatal``: the reason as an error on side band 3); nothing is written.
- ``requests`` records each request as (method, path, status): ``count(...)`` counts them.

A person's commit is made with the ``git`` command line on the bare repository itself
(``commit_files``), as a developer's push would land.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Literal, Self
from urllib.parse import urlsplit

HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
Access = Literal["read", "write"]
IDENTITY = {
    "GIT_AUTHOR_NAME": "A Person",
    "GIT_AUTHOR_EMAIL": "person@example.com",
    "GIT_COMMITTER_NAME": "A Person",
    "GIT_COMMITTER_EMAIL": "person@example.com",
}


class GitMissing(RuntimeError):
    """``git`` or ``git http-backend`` is not installed (``apt-get install git``)."""


def ensure_git() -> str:
    """The path of git-http-backend, or a clear error saying how to install it."""
    if shutil.which("git") is None or not os.access(HTTP_BACKEND, os.X_OK):
        raise GitMissing(f"git and {HTTP_BACKEND} are needed: apt-get install git")
    return HTTP_BACKEND


@dataclass
class GitFault:
    status: int
    times: int | None = 1  # None: every matching request
    match: str = ""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # the tests' output stays quiet
        return

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self) -> None:
        git = self.server.git
        body = self._body()
        path, _, query = self.path.partition("?")
        if git.delay:
            time.sleep(git.delay)
        fault = git.take_fault(path)
        if fault is not None:
            return self._answer(fault.status, b"injected fault\n", {"Content-Type": "text/plain"})
        pushing = path.endswith("/git-receive-pack") or "service=git-receive-pack" in query
        denied = git.check(self.headers.get("Authorization"), pushing)
        if denied is not None:
            challenge = {"WWW-Authenticate": 'Basic realm="tagpin-git"'} if denied == 401 else {}
            return self._answer(denied, b"authentication failed\n", challenge)
        refusal = git.take_refusal() if pushing and self.command == "POST" else None
        if refusal is not None:
            kind = {"Content-Type": "application/x-git-receive-pack-result"}
            return self._answer(200, _refused(body, *refusal), kind)
        status, headers, payload = git.cgi(self.command, path, query, self.headers, body)
        self._answer(status, payload, headers)

    def _answer(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
        self.server.git.record(self.command, self.path, status)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, git: GitServer) -> None:
        self.git = git
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hangs up (a refused push, a stopped test) is not an error of the server."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class GitServer:
    def __init__(self, tokens: dict[str, Access] | None = None, root: Path | None = None) -> None:
        self.backend = ensure_git()
        self._owned = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="tagpin-git-"))
        self.tokens: dict[str, Access] = dict(tokens or {})
        self.delay = 0.0
        self.faults: list[GitFault] = []
        self.refusals: list[tuple[bytes, bool]] = []
        self.requests: list[tuple[str, str, int]] = []
        self.port = 0
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def up(self) -> Self:
        """Listen (again, on the same port once it had one)."""
        if self._server is None:
            self._server = _Server(self.port, self)
            self.port = self._server.server_address[1]
            self._thread = threading.Thread(target=self._server.serve_forever, name="gitserver", daemon=True)
            self._thread.start()
        return self

    def down(self) -> None:
        """Stop listening: connections are refused until ``up()``."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.up()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.down()
        if self._owned:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- faults and records ----------------------------------------------------------------

    def fail(self, status: int, times: int | None = 1, match: str = "") -> None:
        with self._lock:
            self.faults.append(GitFault(status, times, match))

    def refuse(self, reason: bytes, times: int = 1, *, fatal: bool = False) -> None:
        with self._lock:
            self.refusals += [(reason, fatal)] * times

    def take_refusal(self) -> tuple[bytes, bool] | None:
        with self._lock:
            return self.refusals.pop(0) if self.refusals else None

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.refusals.clear()
            self.requests.clear()
            self.delay = 0.0

    def take_fault(self, path: str) -> GitFault | None:
        with self._lock:
            for fault in self.faults:
                if fault.match in path and (fault.times is None or fault.times > 0):
                    if fault.times is not None:
                        fault.times -= 1
                    return fault
        return None

    def record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.requests.append((method, path, status))

    def count(self, match: str = "", status: int | None = None) -> int:
        with self._lock:
            return sum(1 for _m, p, s in self.requests if match in p and (status is None or s == status))

    def check(self, header: str | None, pushing: bool) -> int | None:
        """None when allowed, else the status to answer (401: who are you, 403: not allowed)."""
        if not self.tokens:
            return None
        token = _token(header)
        access = self.tokens.get(token) if token else None
        if access is None:
            return 401
        return 403 if pushing and access != "write" else None

    # -- repositories ----------------------------------------------------------------------

    def path(self, name: str) -> Path:
        return self.root / f"{name.removesuffix('.git')}.git"

    def repo_url(self, name: str) -> str:
        return f"{self.url}/{name.removesuffix('.git')}.git"

    def create(self, name: str, files: dict[str, str] | None = None, branch: str = "main") -> str:
        """A bare repository (with a first commit of ``files`` on ``branch``, when given): its URL."""
        bare = self.path(name)
        bare.parent.mkdir(parents=True, exist_ok=True)
        _git("init", "-q", "--bare", f"--initial-branch={branch}", str(bare))
        _git("--git-dir", str(bare), "config", "http.receivepack", "true")
        if files:
            self.commit_files(name, files, "initial commit", branch=branch)
        return self.repo_url(name)

    def commit_files(
        self, name: str, files: Mapping[str, str | None], message: str, branch: str = "main"
    ) -> str:
        """A person's commit of ``files`` (None deletes) on top of ``branch``: its id."""
        bare = self.path(name)
        env = {**os.environ, **IDENTITY, "GIT_DIR": str(bare)}
        with tempfile.TemporaryDirectory(prefix="tagpin-git-index-") as scratch:
            env["GIT_INDEX_FILE"] = str(Path(scratch) / "index")
            parent = self.head(name, branch)
            if parent:
                _git("read-tree", parent, env=env)
            for path, text in files.items():
                if text is None:
                    _git("update-index", "--force-remove", path, env=env)
                    continue
                blob = _git("hash-object", "-w", "--stdin", env=env, stdin=text.encode())
                _git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = _git("write-tree", env=env)
            args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
            commit = _git(*args, env=env)
            _git("update-ref", f"refs/heads/{branch}", commit, parent or "0" * 40, env=env)
        return commit

    def head(self, name: str, branch: str = "main") -> str | None:
        found = subprocess.run(
            ["git", "--git-dir", str(self.path(name)), "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return found.stdout.strip() or None

    def show(self, name: str, path: str, rev: str = "main") -> str:
        return _git("--git-dir", str(self.path(name)), "show", f"{rev}:{path}", strip=False)

    def log(self, name: str, rev: str = "main") -> list[str]:
        """Commit subjects, newest first."""
        out = _git("--git-dir", str(self.path(name)), "log", "--format=%s", rev)
        return out.splitlines()

    def branches(self, name: str) -> list[str]:
        out = _git(
            "--git-dir", str(self.path(name)), "for-each-ref", "--format=%(refname:short)", "refs/heads"
        )
        return out.splitlines()

    # -- the CGI ---------------------------------------------------------------------------

    def cgi(
        self, method: str, path: str, query: str, headers: object, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        get = getattr(headers, "get")  # noqa: B009 (an email.message.Message)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": get("Content-Type") or "",
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "tagpin",
            "REMOTE_ADDR": "127.0.0.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        if get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = get("Content-Encoding")
        if get("Git-Protocol"):
            env["GIT_PROTOCOL"] = get("Git-Protocol")
        done = subprocess.run([self.backend], input=body, capture_output=True, env=env, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = done.stdout.partition(b"\n\n")
        status, out = 200, {}
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                out[name.strip()] = value.strip()
        if done.returncode != 0 and not done.stdout:
            return 500, {"Content-Type": "text/plain"}, done.stderr[-2000:]
        return status, out, payload


def _pkt(data: bytes) -> bytes:
    return f"{len(data) + 4:04x}".encode() + data


def _refused(body: bytes, reason: bytes, fatal: bool) -> bytes:
    """receive-pack's answer refusing the push's first command (``body``: the client's request)."""
    command, _, capabilities = body[4 : int(body[:4], 16)].partition(b"\0")
    ref = command.split()[2]
    report = _pkt(b"unpack ok\n") + _pkt(b"ng " + ref + b" " + reason + b"\n") + b"0000"
    if b"side-band-64k" not in capabilities.split():
        return report
    if fatal:
        return _pkt(b"\x03" + reason) + b"0000"
    return b"".join(_pkt(b"\x01" + report[i : i + 65515]) for i in range(0, len(report), 65515)) + b"0000"


def _token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip()).decode()
        except ValueError:
            return None
        return decoded.partition(":")[2] or None
    return None


def _git(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None, strip: bool = True
) -> str:
    done = subprocess.run(["git", *args], input=stdin, capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()}")
    out = done.stdout.decode()
    return out.strip() if strip else out


def host_of(url: str) -> str:
    """``host:port`` of a repository URL."""
    return urlsplit(url).netloc.rpartition("@")[2]
