"""A real Kubernetes control plane on 127.0.0.1: :class:`KubeCluster`.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler of the release pinned in
tools/kube/versions.env (built by ``make kube-tools``), and kwok as the kubelets' stand-in
(:mod:`.kubelet`), each on free ports with its files in one temporary directory. Flags follow
controller-runtime's envtest (service-account issuer and keys, RBAC, a client CA) with these
choices of ours:

- kube-scheduler runs, so pods of any workload bind to the kwok node as in a real cluster (nothing
  in the tests' manifests names a node; ``kubectl create deployment`` cannot).
- The TaintNodesByCondition admission plugin is off: it taints every new node not-ready, and the
  node-lifecycle controller that would lift the taint is not run (it would also evict pods from a
  node without kubelet heartbeats).
- The controller-manager runs the controllers of workloads tagpin manages and what they need
  (:data:`CONTROLLERS`), under one system:masters identity (``--use-service-account-credentials``
  off). No job, cronjob, node, service or endpoint controllers.

Identities: ``admin`` (system:masters, a client certificate), :meth:`KubeCluster.add_user` (a
client certificate: CN the user, O its groups) and :meth:`KubeCluster.service_account` (a
TokenRequest token of a ServiceAccount, the form tagpin's cluster secret takes).

Usage::

    with KubeCluster() as kube:
        kube.kubectl("create", "deployment", "web", "--image=nginx:1.27")
        tagpin = kube.service_account("tagpin-system", "tagpin")
        kube.kubectl("auth", "can-i", "patch", "deployments", identity=tagpin)
        kube.kubelet.break_image("sha256:bad")            # pods of it never get Ready
        kube.kubelet.set_image_id("nginx:1.27", "sha256:...")  # the digest pods of a tag report
        kube.objects.patch("Deployment", "default", "web", {...})  # objects by kind (.objects)
        front = kube.front()                              # faults before the API server (.front)
        front.inject("PATCH", r"/deployments/web$", status=500, times=2)
        kube.write_kubeconfig(path, tagpin, server=front.url)

:attr:`KubeCluster.timings` (seconds per start-up phase) and :meth:`KubeCluster.rss` are the
figures tests/support/kube.py prints for each test module's cluster.
"""

from __future__ import annotations

import atexit
import json
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from kubernetes import client

from . import access, binaries, flags, pki
from .access import Identity
from .argo import ArgoRollouts, install_crd
from .eks import EksAuthenticator
from .front import KubeFront
from .kubelet import NODE_ANNOTATION, KubeletStages, node
from .objects import Objects
from .procs import Process, ProcessFailed, env_for, free_port

NODE_NAME = "kwok-node-0"


class KubeCluster:
    """One control plane; thread-safe to read from, started and stopped from one thread."""

    def __init__(self, name: str = "local", log: Callable[[str], None] | None = None) -> None:
        self.name = name
        self._log = log or (lambda _msg: None)
        self.processes: dict[str, Process] = {}
        self.timings: dict[str, float] = {}  # seconds each start-up phase took, and "total"
        self.dir = Path()
        self.port = 0
        self._ca: pki.CertificateAuthority | None = None
        self._admin: Identity | None = None
        self._kubelet: KubeletStages | None = None
        self._clients: dict[str, client.ApiClient] = {}
        self._front_proxy: pki.KeyPair | None = None
        self._fronts: list[KubeFront] = []
        self._objects: Objects | None = None
        self._eks: EksAuthenticator | None = None
        self._argo: ArgoRollouts | None = None

    # -- lifecycle
    def start(self, timeout: float = 180.0) -> Self:
        started = time.monotonic()
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        self.timings["total"] = time.monotonic() - started
        self._log(f"kube {self.name}: ready at {self.url} in {self.timings['total']:.1f} s")
        return self

    def _phase(self, name: str, since: float) -> float:
        now = time.monotonic()
        self.timings[name] = now - since
        return now

    def _start(self, timeout: float) -> None:
        t = time.monotonic()
        self.dir = Path(tempfile.mkdtemp(prefix=f"tagpin-kube-{self.name}-"))
        _started.add(self)
        for sub in ("pki", "etcd", "logs", "home"):
            (self.dir / sub).mkdir()
        ca = self._ca = pki.CertificateAuthority(self.dir / "pki")
        serving, sa = ca.serving("kube-apiserver"), pki.signing_key(self.dir / "pki")
        (self.dir / "pki" / "front-proxy").mkdir()
        front_ca = pki.CertificateAuthority(self.dir / "pki" / "front-proxy", "tagpin-front-proxy-ca")
        self._front_proxy = front_ca.client(flags.FRONT_PROXY_USER)
        self._admin = self.add_user("tagpin-admin", ("system:masters",), name="admin")
        self._eks = EksAuthenticator(ca, self.dir / "pki").start()
        t = self._phase("certificates", t)

        etcd_url, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
        self._run("etcd", flags.etcd(self.dir / "etcd", etcd_url, peer))
        self._wait("etcd", lambda: _get(f"{etcd_url}/health") is not None, timeout)
        t = self._phase("etcd", t)

        self.port = free_port()
        self._run(
            "kube-apiserver",
            flags.apiserver(
                self.port, etcd_url, serving, ca.pair.cert, sa, front_ca.pair.cert, self._eks.config
            ),
        )
        self._wait("kube-apiserver", lambda: self._https_ok(self.port, "/readyz"), timeout)
        t = self._phase("kube-apiserver", t)

        kcm, sched, kwok = free_port(), free_port(), free_port()
        kcm_config = self._component_kubeconfig("system:kube-controller-manager", ("system:masters",))
        self._run(
            "kube-controller-manager", flags.controller_manager(kcm, serving, kcm_config, ca.pair.cert, sa)
        )
        sched_config = self._component_kubeconfig("system:kube-scheduler")
        self._run("kube-scheduler", flags.scheduler(sched, serving, sched_config))
        self._kubelet = KubeletStages(self.api_client())
        self._kubelet.install(timeout)
        install_crd(self.api_client(), timeout)
        kwok_config = self._component_kubeconfig("kwok", ("system:masters",))
        self._run("kwok", flags.kwok(kwok, kwok_config, NODE_ANNOTATION), env=env_for(self.dir / "home"))
        self._wait("kube-controller-manager", lambda: self._https_ok(kcm, "/healthz"), timeout)
        self._wait("kube-scheduler", lambda: self._https_ok(sched, "/healthz"), timeout)
        self._wait("kwok", lambda: _get(f"http://127.0.0.1:{kwok}/healthz") is not None, timeout)
        client.CoreV1Api(self.api_client()).create_node(node(NODE_NAME))
        self._wait_node_ready(NODE_NAME, timeout)
        self._kubelet.touch()  # kwok may have seen only some Stages (the node's): it reads all again
        self._wait("the default ServiceAccount", self._default_service_account, timeout)
        # its own clients: a watch holds a connection of the pool for as long as it runs
        self._argo = ArgoRollouts(self._new_client(self.admin), self._new_client(self.admin)).start()
        self._phase("controllers, scheduler, kwok", t)

    def stop(self) -> None:
        """Stop every process (the reverse of the start order) and remove the files."""
        for front in self._fronts:
            front.stop()
        self._fronts.clear()
        if self._argo is not None:
            self._argo.stop()
            self._argo = None
        for name in reversed(list(self.processes)):
            self.processes[name].stop()
        self.processes.clear()
        if self._eks is not None:
            self._eks.stop()
            self._eks = None
        for api in self._clients.values():
            api.close()  # type: ignore[no-untyped-call]
        self._clients.clear()
        self._objects = None
        if self in _started:  # the files go once nothing writes them any more
            shutil.rmtree(self.dir, ignore_errors=True)
            _started.discard(self)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- what tests use
    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        assert self._ca is not None, "not started"
        return self._ca.pair.cert_pem

    @property
    def admin(self) -> Identity:
        assert self._admin is not None, "not started"
        return self._admin

    @property
    def objects(self) -> Objects:
        """Objects by kind as the admin (:mod:`.objects`): ``create``, ``get``, ``list``, ``patch``..."""
        if self._objects is None:
            self._objects = Objects(self.api_client())
        return self._objects

    @property
    def kubelet(self) -> KubeletStages:
        assert self._kubelet is not None, "not started"
        return self._kubelet

    @property
    def argo(self) -> ArgoRollouts:
        """The Argo Rollouts stand-in (:mod:`.argo`): ``promote``, ``abort``."""
        assert self._argo is not None, "not started"
        return self._argo

    @property
    def eks(self) -> EksAuthenticator:
        """The token webhook that makes this API server an EKS cluster (:mod:`.eks`)."""
        assert self._eks is not None, "not started"
        return self._eks

    def front(self) -> KubeFront:
        """A fault-injecting front started before this API server (:mod:`.front`); stopped with it
        or by :meth:`drop_front`."""
        assert self._ca is not None and self._front_proxy is not None, "not started"
        serving = self._ca.serving(f"kube-front-{len(self._fronts)}")
        front = KubeFront(self.url, self._ca.pair, serving, self._front_proxy).start()
        self._fronts.append(front)
        return front

    def drop_front(self, front: KubeFront | None = None) -> None:
        """Stop ``front`` (every front when None)."""
        for dropped in [front] if front is not None else list(self._fronts):
            dropped.stop()
            if dropped in self._fronts:
                self._fronts.remove(dropped)

    def add_node(self, name: str, platform: str = "linux/amd64") -> None:
        """Another kwok node (``os/architecture`` in its labels and nodeInfo); waits until it is Ready."""
        client.CoreV1Api(self.api_client()).create_node(node(name, platform))
        self._wait_node_ready(name, 60)

    def rss(self) -> dict[str, int]:
        """Resident memory of each process now, in bytes."""
        return {name: p.rss() for name, p in self.processes.items()}

    def add_user(self, user: str, groups: tuple[str, ...] = (), name: str | None = None) -> Identity:
        """An identity with a client certificate of this cluster's CA."""
        assert self._ca is not None, "not started"
        return Identity(name or user, user, cert=self._ca.client(user, groups))

    def service_account(self, namespace: str, name: str, seconds: int = 86400) -> Identity:
        """The ServiceAccount (created with its namespace if missing) and a TokenRequest token for it."""
        return access.service_account(self.api_client(), namespace, name, seconds)

    def kubeconfig(
        self,
        identity: Identity | None = None,
        namespace: str = "default",
        server: str | None = None,
        context: str | None = None,
    ) -> dict[str, Any]:
        """A kubeconfig for ``identity`` (admin by default); ``server``: e.g. a front's URL;
        ``context``: the name of its cluster, user and context (the identity's by default)."""
        who = identity or self.admin
        return access.kubeconfig(who, server or self.url, self.ca_pem, namespace, context)

    def write_kubeconfig(
        self, path: str | Path, identity: Identity | None = None, server: str | None = None
    ) -> Path:
        """The kubeconfig as JSON (which kubectl and ``load_kube_config`` read as YAML)."""
        out = Path(path)
        out.write_text(json.dumps(self.kubeconfig(identity, server=server), indent=2))
        out.chmod(0o600)
        return out

    def api_client(self, identity: Identity | None = None, server: str | None = None) -> client.ApiClient:
        """An API client of the official library for ``identity`` (admin by default), cached."""
        who = identity or self.admin
        key = f"{who.name} {server or self.url}"
        if key not in self._clients:
            self._clients[key] = self._new_client(who, server)
        return self._clients[key]

    def _new_client(self, who: Identity, server: str | None = None) -> client.ApiClient:
        assert self._ca is not None, "not started"
        return access.api_client(who, server or self.url, self._ca.pair.cert)

    def kubectl(
        self,
        *args: str,
        identity: Identity | None = None,
        input: str | None = None,
        check: bool = True,
        server: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl as a process against this cluster (stdout, stderr and the exit code are kept)."""
        who = identity or self.admin
        config = self.dir / f"kubeconfig-{who.name}-{(server or self.url).rsplit(':', 1)[1]}"
        if not config.exists():  # written once: kubectl processes may run side by side
            self.write_kubeconfig(config.with_suffix(".tmp"), who, server).rename(config)
        env = env_for(self.dir / "home") | {
            "KUBECONFIG": str(config),
            "KUBECACHEDIR": str(self.dir / "kcache"),
        }
        return access.kubectl(args, env, input, check)

    # -- start-up helpers
    def _run(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        self._log(f"kube {self.name}: starting {name}")
        argv: list[str | Path] = [binaries.binary(name), *args]
        self.processes[name] = Process(name, argv, self.dir / "logs", env).start()

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for process in self.processes.values():
                process.check()
            try:
                if ready():
                    return
            except (OSError, client.ApiException):
                pass
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name}\n{p.tail(10)}" for p in self.processes.values())
                raise ProcessFailed(f"kube {self.name}: {what} not ready in {timeout:.0f} s\n{logs}")
            time.sleep(0.05)

    def _wait_node_ready(self, name: str, timeout: float, nudge_every: float = 5.0) -> None:
        """Wait until kwok reports the node Ready; every ``nudge_every`` s, touch the node (a label)
        and kwok's Stages (:meth:`KubeletStages.touch`: kwok may hold a stale empty list of them,
        seen in CI at stops 39 and 50: no Stage played, the node NotReady for 180 s)."""
        assert self._kubelet is not None
        deadline = time.monotonic() + timeout
        nudges = 0
        while True:
            left = deadline - time.monotonic()
            try:
                self._wait(f"node {name} Ready", lambda: self._node_ready(name), min(nudge_every, left))
                return
            except ProcessFailed:
                if time.monotonic() >= deadline:
                    raise
            nudges += 1
            self._log(f"kube {self.name}: node {name} not Ready yet; nudging it and kwok ({nudges})")
            body = {"metadata": {"labels": {"tagpin-nudge": str(nudges)}}}
            client.CoreV1Api(self.api_client()).patch_node(name, body)
            self._kubelet.touch()

    def _component_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        identity = self.add_user(user, groups)
        return self.write_kubeconfig(self.dir / f"kubeconfig-{identity.name.replace(':', '-')}", identity)

    def _https_ok(self, port: int, path: str) -> bool:
        assert self._ca is not None
        context = ssl.create_default_context(cafile=str(self._ca.pair.cert))
        assert self.admin.cert is not None
        context.load_cert_chain(self.admin.cert.cert, self.admin.cert.key)
        return _get(f"https://127.0.0.1:{port}{path}", context) == b"ok"

    def node_ready(self, name: str = NODE_NAME) -> bool:
        """Whether the node reports Ready."""
        return self._node_ready(name)

    def _node_ready(self, name: str = NODE_NAME) -> bool:
        status = client.CoreV1Api(self.api_client()).read_node(name).status
        conditions = (status.conditions if status else None) or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    def _default_service_account(self) -> bool:
        client.CoreV1Api(self.api_client()).read_namespaced_service_account("default", "default")
        return True


_started: set[KubeCluster] = set()


@atexit.register
def _stop_started() -> None:
    """The guard: a cluster its owner did not stop is stopped when the interpreter exits."""
    for cluster in list(_started):
        cluster.stop()


def _get(url: str, context: ssl.SSLContext | None = None) -> bytes | None:
    """The body of a 200 answer, else None."""
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as answer:  # noqa: S310 (our URLs)
            body: bytes = answer.read()
            return body if answer.status == 200 else None
    except OSError:
        return None
