"""The HTTP server: :class:`KubeSim` (start/stop, kubeconfig, faults, the request log) and its handler.

Only 127.0.0.1 is ever bound.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Self
from urllib.parse import parse_qs, urlsplit

from .api import Api, Request
from .manifests import namespace
from .resources import ApiError, Obj, status_object
from .tls import _self_signed_cert


class RequestRecord(NamedTuple):
    method: str
    path: str  # without the query string
    content_type: str | None


@dataclass
class Fault:
    """An injected failure; see :meth:`KubeSim.inject`."""

    method: str
    pattern: re.Pattern[str]
    status: int | None
    times: int | None
    delay: float
    drop: bool
    action: Callable[[], object] | None = None
    hits: int = 0


class KubeSim(Api):
    """The simulator. Thread-safe; every public method may be called while the server runs.

    Knobs (plain attributes): ``image_id_for`` (``image -> digest | imageID | None``),
    ``rollout_delay`` (seconds before a rollout completes; 0 = in the same write),
    ``fail_rollouts`` (rollouts end with Progressing=False/ProgressDeadlineExceeded and old Pods stay),
    ``broken`` (digests or image references: a pod template with a container image that contains one
    of them never becomes available: the same failure, for that image only; see :meth:`break_image`),
    ``nodes`` (DaemonSet Pods per DaemonSet). Authorization: :meth:`grant`, :meth:`revoke`,
    :meth:`add_token` (:mod:`.authz`; by default every request of an accepted token is allowed).

    One mixin per concern over a shared :class:`~.state.State` (see :mod:`.state`).
    """

    def __init__(self, token: str | None = None, rollout_delay: float = 0.0, tls: bool = False) -> None:
        super().__init__(rollout_delay)
        self.token = token
        self._users: dict[str, str] = {}  # more accepted tokens and their users (see .authz)
        self._grants: dict[str, Any] = {}  # token -> its RBAC rules; absent: everything allowed
        self.tls = tls
        self.ca_file: Path | None = None  # the self-signed server certificate when ``tls=True``...
        self.ca_pem: bytes | None = None  # ...and its PEM text
        self.requests: list[RequestRecord] = []
        self._faults: list[Fault] = []
        self._down: str | None = None
        self._thread: threading.Thread | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.create(namespace("default"))

    # -- lifecycle
    def start(self) -> Self:
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.sim = self
        if self.tls:
            self._tmp = tempfile.TemporaryDirectory(prefix="kubesim-")
            self.ca_file, key = _self_signed_cert(Path(self._tmp.name))
            self.ca_pem = self.ca_file.read_bytes()
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.ca_file, key)
            # the handshake then happens in the handler thread, not in the accept loop
            server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            for t in self._timers.values():
                t.cancel()
            self._timers.clear()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("KubeSim is not started")
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def kubeconfig(self, context: str = "sim", namespace: str = "default") -> Obj:
        """A kubeconfig for this server. kubectl (client-go) sends the token only over TLS: start the
        simulator with ``tls=True`` for kubectl to authenticate; the Python client sends it over http."""
        user: Obj = {"token": self.token} if self.token else {}
        cluster: Obj = {"server": self.url}
        if self.ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": user}],
            "contexts": [
                {"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}
            ],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, context: str = "sim") -> Path:
        """Write the kubeconfig as JSON (valid YAML for kubectl and ``load_kube_config``)."""
        out = Path(path)
        out.write_text(json.dumps(self.kubeconfig(context), indent=2))
        return out

    # -- faults
    def inject(
        self,
        method: str,
        path_regex: str,
        *,
        status: int | None = 500,
        times: int | None = 1,
        delay: float = 0.0,
        drop: bool = False,
        action: Callable[[], object] | None = None,
    ) -> Fault:
        """Fail matching requests: ``method`` is an HTTP verb or ``*``; ``path_regex`` is searched in the
        path (no query). ``status=None`` lets the request through (after ``delay`` and ``action``, e.g.
        a concurrent ``sim.patch`` that makes this request's resourceVersion stale); ``drop=True``
        closes the connection without an answer; ``times=None`` means forever. Faults are matched in
        the order they were added. Returns the :class:`Fault` (see ``.hits``)."""
        fault = Fault(method.upper(), re.compile(path_regex), status, times, delay, drop, action)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._down = None

    def set_down(self, down: bool = True, mode: str = "close") -> None:
        """Every request fails: ``mode="close"`` drops the connection, ``"503"`` answers 503."""
        if mode not in ("close", "503"):
            raise ValueError("mode must be 'close' or '503'")
        with self._lock:
            self._down = mode if down else None

    def count(self, method: str, path_regex: str = "") -> int:
        """How many logged requests match ``method`` (or ``*``) and ``path_regex``."""
        pat = re.compile(path_regex)
        with self._lock:
            return sum(
                1 for r in self.requests if method in ("*", r.method) and pat.search(r.path) is not None
            )

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    sim: KubeSim

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, dropped faults, TLS probes) are not errors worth printing."""
        if isinstance(sys.exc_info()[1], ConnectionError | ssl.SSLError | TimeoutError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubesim/1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _sim(self) -> KubeSim:
        assert isinstance(self.server, _Server)
        return self.server.sim

    def _send(self, code: int, payload: Obj, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: Iterator[Obj]) -> None:
        """A chunked stream of JSON lines, as the API server sends watch events."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _drop(self) -> None:
        self.close_connection = True
        self.wfile.flush()

    def _serve(self) -> None:
        sim = self._sim()
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        ctype = self.headers.get("Content-Type")
        method = self.command
        with sim._lock:
            sim.requests.append(RequestRecord(method, path, ctype))
            down = sim._down
            fault = next(
                (f for f in sim._faults if f.method in ("*", method) and f.pattern.search(path)), None
            )
            if fault is not None:
                fault.hits += 1
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        sim._faults.remove(fault)
        if down == "close":
            return self._drop()
        if down == "503":
            return self._send(503, status_object(503, "the cluster is down (kubesim)"))
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            if fault.action is not None:
                fault.action()
            if fault.drop:
                return self._drop()
            if fault.status is not None:
                headers = {"Retry-After": "1"} if fault.status in (429, 503) else None
                return self._send(fault.status, status_object(fault.status, "injected by kubesim"), headers)
        header = self.headers.get("Authorization") or ""
        token = header[7:] if header.startswith("Bearer ") else None
        if not sim.authenticates(token):
            return self._send(401, status_object(401, "Unauthorized"))
        req = Request(method, path, query, ctype, body, self.headers.get("Accept") or "", token)
        try:
            if method == "GET" and query.get("watch") in ("true", "1"):
                return self._stream(sim.watch_events(req))
            result = sim.handle(req)
        except ApiError as err:
            return self._send(err.code, err.status())
        except Exception as exc:  # a simulator bug must still answer
            return self._send(500, status_object(500, f"kubesim internal error: {exc!r}"))
        code = int(result.pop("__code__", 200))
        self._send(code, result)
        return None

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
