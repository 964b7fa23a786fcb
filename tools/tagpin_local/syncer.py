"""A stand-in for a GitOps tool's sync, for the tests, the benchmark and the demo only (it is not
part of tagpin, and it is not Argo CD or Flux): it takes a path of a repository on the local Git
server (:mod:`tagpin_local.gitserver`) at a branch's head and applies it to a cluster with
``kubectl apply`` (``-k`` for a directory with a kustomization, ``-f`` otherwise), nothing more:
no diff, no health, no pruning, no self-heal, no tracking label of its own (the manifests carry
the label Argo CD's label tracking would write). What it shows is the one thing tagpin relies on:
what is committed reaches the cluster, and only through Git.

``sync()`` applies the head once; ``start(interval)`` applies every new head in a thread, as an
automated sync does after each refresh.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Self

from tagpin_local.gitserver import GitServer
from tagpin_local.kube.local import LocalCluster


class SyncFailed(RuntimeError):
    """kubectl refused what the repository says (the message is kubectl's)."""


class Syncer:
    def __init__(
        self, git: GitServer, repository: str, path: str, cluster: LocalCluster, branch: str = "main"
    ) -> None:
        self.git, self.repository, self.path, self.branch = git, repository, path.strip("/"), branch
        self.cluster = cluster
        self.synced: list[str] = []  # the commits applied, oldest first
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._scratch = Path(tempfile.mkdtemp(prefix="tagpin-syncer-"))
        self._kubeconfig = cluster.write_kubeconfig(self._scratch / "kubeconfig", identity=cluster.admin)

    def sync(self) -> str:
        """Apply the branch's head; the commit applied."""
        with self._lock:
            head = self.git.head(self.repository, self.branch)
            if head is None:
                raise SyncFailed(f"{self.repository} has no branch {self.branch}")
            archive = subprocess.run(
                [
                    "git",
                    "--git-dir",
                    str(self.git.path(self.repository)),
                    "archive",
                    "--format=tar",
                    head,
                    self.path,
                ],
                capture_output=True,
                check=True,
            ).stdout
            tree = Path(tempfile.mkdtemp(dir=self._scratch))
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(tree, filter="data")
            where = tree / self.path
            how = "-k" if where.is_dir() and (where / "kustomization.yaml").exists() else "-f"
            done = subprocess.run(
                ["kubectl", "--kubeconfig", str(self._kubeconfig), "apply", how, str(where)],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
            if done.returncode != 0:
                raise SyncFailed(done.stderr.strip()[-2000:])
            self.synced.append(head)
            return head

    def start(self, interval: float = 0.5) -> Self:
        """Apply every new head, checking every ``interval`` seconds."""

        def loop() -> None:
            while not self._stop.wait(interval):
                head = self.git.head(self.repository, self.branch)
                if head is not None and (not self.synced or self.synced[-1] != head):
                    try:
                        self.sync()
                    except (SyncFailed, subprocess.SubprocessError) as exc:
                        self.errors.append(str(exc))

        self._thread = threading.Thread(target=loop, name=f"syncer-{self.repository}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
