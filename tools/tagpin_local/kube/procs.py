"""The control plane's processes: started with their output in a log file, stopped for sure.

Each process is started in a session of its own (a Ctrl-C in the terminal reaches only Python, which
then stops it in order) and, where util-linux's ``setpriv`` is there, with a parent-death signal: if
the Python process dies without stopping it (SIGKILL, a crash), the kernel kills it. That signal
follows the *thread* that forked the process, not the process: so every process is forked by one
thread that lives as long as the interpreter (:func:`_spawn`), whichever thread asks for it (a
cluster may be started from a short-lived thread, several side by side). An ``atexit`` guard stops
whatever is still running at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

_live: set[Process] = set()
_live_lock = threading.Lock()


def free_port() -> int:
    """A port free on 127.0.0.1 now (the OS picks it; envtest does the same)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ProcessFailed(RuntimeError):
    """A process exited while it should run; the message ends with its last log lines."""


class Process:
    def __init__(
        self, name: str, argv: Sequence[str | Path], log_dir: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log = log_dir / f"{name}.log"
        self.env = dict(env) if env is not None else None
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def start(self) -> Process:
        prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        with self.log.open("ab") as out:
            self._popen = _spawn(
                lambda: subprocess.Popen(
                    prefix + self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,
                )
            )
        with _live_lock:
            _live.add(self)
        return self

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def check(self) -> None:
        """Raise :class:`ProcessFailed` if the process has exited."""
        if self._popen is not None and self._popen.poll() is not None:
            raise ProcessFailed(
                f"{self.name} exited with {self._popen.returncode}; last lines of {self.log}:\n{self.tail()}"
            )

    def tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def rss(self) -> int:
        """Resident memory in bytes now (0 when not running)."""
        if not self.running() or self.pid is None:
            return 0
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; waits until the process is gone."""
        popen = self._popen
        if popen is not None and popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    popen.kill()
                popen.wait()
        with _live_lock:
            _live.discard(self)


class _Spawner:
    """One thread, started on first use and living as long as the interpreter, that forks every
    process: the parent-death signal of what it starts fires when the process dies, not when the
    thread that asked ends."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _serve(self) -> None:
        while True:
            fork, done = self._requests.get()
            try:
                done.set_result(fork())
            except BaseException as exc:  # handed to the caller
                done.set_exception(exc)

    def __call__(self, fork: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="kube-spawner", daemon=True)
                self._thread.start()
        done: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((fork, done))
        return done.result()


_spawn = _Spawner()


def running() -> list[Process]:
    """Every process started here and not stopped yet."""
    with _live_lock:
        return [p for p in _live if p.running()]


@atexit.register
def _stop_all() -> None:
    for process in running():
        process.stop(timeout=5)


def env_for(home: Path) -> dict[str, str]:
    """The environment of a component: ours, with HOME in its own directory (kwok reads ~/.kwok)."""
    env = dict(os.environ)
    env["HOME"] = str(home)
    return env
