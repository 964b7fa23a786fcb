"""RegistryClient, the OCI pusher and push notifications against the real CNCF registry (127.0.0.1 only)."""

import hashlib
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import OCI_INDEX, OCI_MANIFEST, ManifestNotFound, RegistryAccess
from tagpin_local.oci import push_image
from tagpin_local.registry_server import EVENTS_MEDIA_TYPE, REGISTRY_BINARY, RegistryServer

pytestmark = pytest.mark.integration

SKOPEO = "/usr/bin/skopeo"


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is required in CI")
    pytest.skip(f"{what} not installed", allow_module_level=True)


if not os.access(REGISTRY_BINARY, os.X_OK):
    _missing(f"{REGISTRY_BINARY} (apt-get install docker-registry)")


class Receiver:
    """A local HTTP endpoint recording registry notifications."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[dict[str, str], dict[str, Any]]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    receiver.deliveries.append((dict(self.headers.items()), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/events"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return [e for _h, body in self.deliveries for e in body["events"]]

    def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events():
                if match(event):
                    return event
            time.sleep(0.05)
        raise AssertionError(f"no matching event within {timeout}s; got {self.events()}")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    yield rec
    rec.server.shutdown()


@pytest.fixture(scope="module")
def registry(receiver: Receiver) -> Iterator[RegistryServer]:
    with RegistryServer(
        notify_url=receiver.url, notify_headers={"Authorization": "Bearer hook-secret"}
    ) as server:
        yield server


@pytest.fixture
def client(registry: RegistryServer) -> Iterator[RegistryClient]:
    with RegistryClient(access=lambda host: RegistryAccess(insecure=host == registry.host)) as c:
        yield c


def skopeo_digest(registry: RegistryServer, repository: str, tag: str) -> str:
    if not os.access(SKOPEO, os.X_OK) and not shutil.which("skopeo"):
        _missing("skopeo")
    out = subprocess.run(
        [SKOPEO, "inspect", "--tls-verify=false", "--raw", f"docker://{registry.host}/{repository}:{tag}"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    return "sha256:" + hashlib.sha256(out).hexdigest()


def test_server_properties(registry: RegistryServer) -> None:
    assert registry.url == f"http://{registry.host}"
    assert registry.host.startswith("127.0.0.1:")
    assert httpx.get(f"{registry.url}/v2/").status_code == 200


def test_resolve_single_manifest(registry: RegistryServer, client: RegistryClient) -> None:
    pushed = push_image(registry.url, "demo/web", "latest")
    res = client.resolve(ImageRef.parse(f"{registry.host}/demo/web:latest"))
    assert res.digest == pushed
    assert (res.method, res.media_type) == ("HEAD", OCI_MANIFEST)
    assert res.digest == skopeo_digest(registry, "demo/web", "latest")


def test_resolve_multi_arch_index(registry: RegistryServer, client: RegistryClient) -> None:
    pushed = push_image(registry.url, "demo/multi", "stable", platforms=["linux/amd64", "linux/arm64"])
    res = client.resolve(ImageRef.parse(f"{registry.host}/demo/multi:stable"))
    assert (res.digest, res.media_type) == (pushed, OCI_INDEX)
    assert res.digest == skopeo_digest(registry, "demo/multi", "stable")
    index = httpx.get(f"{registry.url}/v2/demo/multi/manifests/stable", headers={"Accept": OCI_INDEX}).json()
    assert [m["platform"]["architecture"] for m in index["manifests"]] == ["amd64", "arm64"]


def test_repush_moves_the_tag(registry: RegistryServer, client: RegistryClient) -> None:
    ref = ImageRef.parse(f"{registry.host}/demo/moving:latest")
    first = push_image(registry.url, "demo/moving", "latest")
    assert client.resolve(ref).digest == first
    second = push_image(registry.url, "demo/moving", "latest")
    assert second != first
    assert client.resolve(ref).digest == second
    # Same content pushed again gives the same digest (the pusher is deterministic apart from the layer).
    assert push_image(registry.url, "demo/fixed", "v1", content=b"x") == push_image(
        registry.url, "demo/fixed", "v2", content=b"x"
    )


def test_unknown_tag(registry: RegistryServer, client: RegistryClient) -> None:
    with pytest.raises(ManifestNotFound):
        client.resolve(ImageRef.parse(f"{registry.host}/demo/web:does-not-exist"))


def test_push_notification_reaches_receiver(registry: RegistryServer, receiver: Receiver) -> None:
    digest = push_image(registry.url, "demo/notify", "latest")
    event = receiver.wait_for(
        lambda e: (
            e["action"] == "push"
            and e["target"].get("repository") == "demo/notify"
            and e["target"].get("tag") == "latest"
        )
    )
    assert event["target"]["digest"] == digest
    assert event["target"]["mediaType"] == OCI_MANIFEST
    assert event["request"]["host"] == registry.host
    headers = next(h for h, body in receiver.deliveries if event in body["events"])
    assert headers["Content-Type"] == EVENTS_MEDIA_TYPE
    assert headers["Authorization"] == "Bearer hook-secret"


def test_notifications_drop_blobs_and_pulls(registry: RegistryServer, receiver: Receiver) -> None:
    digest = push_image(registry.url, "demo/quiet", "latest")
    receiver.wait_for(lambda e: e["target"].get("digest") == digest)
    httpx.get(f"{registry.url}/v2/demo/quiet/manifests/latest", headers={"Accept": OCI_MANIFEST})
    time.sleep(1.5)
    mine = [e for e in receiver.events() if e["target"].get("repository") == "demo/quiet"]
    assert [(e["action"], e["target"]["mediaType"]) for e in mine] == [("push", OCI_MANIFEST)]
