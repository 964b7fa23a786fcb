"""The kubelets' stand-in: kwok's Stage objects (stages/*.yaml) and the knobs tests turn.

kwok (sigs.k8s.io/kwok) runs with ``--enable-crds=Stage``: it plays the Stage objects it finds in
the cluster, and picks up changes to them at once. So a test's knob is a rewrite of a Stage:

- :meth:`KubeletStages.break_image`: pods with an image containing the text never become Ready
  (stages/pod-broken.yaml: ImagePullBackOff); the real deployment controller then reports
  ``ProgressDeadlineExceeded``. It applies to pods that start after the call
  (:meth:`KubeletStages.repair_image` undoes it).
- :meth:`KubeletStages.set_image_id`: the ``imageID`` pods running a tag report (what a kubelet
  resolved the tag to). Pinned images (``repo:tag@sha256:...``) always report their own digest.
- :meth:`KubeletStages.set_ready_delay`: pods become Ready that long after they are bound (the
  pod-ready Stage's ``delay``), so a rollout takes about that long per pod.

Nothing else of a kubelet is simulated: no containers run, no probes, no logs or exec.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes import client
from kubernetes.client import ApiException

from .binaries import STAGE_CRD, bin_dir

STAGES_DIR = Path(__file__).resolve().parent / "stages"
STAGE_FILES = ("node-initialize.yaml", "pod-ready.yaml", "pod-broken.yaml", "pod-delete.yaml")
GROUP, VERSION, PLURAL = "kwok.x-k8s.io", "v1alpha1", "stages"
NODE_ANNOTATION = "kwok.x-k8s.io/node"  # kwok manages the nodes annotated with it ("fake")


def _fill(value: Any, replacements: dict[str, str]) -> Any:
    if isinstance(value, str):
        for placeholder, text in replacements.items():
            value = value.replace(placeholder, text)
        return value
    if isinstance(value, dict):
        return {k: _fill(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, replacements) for v in value]
    return value


def image_repo(image: str) -> str:
    """``reg:5000/a/b:tag@sha256:..`` -> ``reg:5000/a/b`` (as the kubelet names an imageID)."""
    ref = image.split("@", 1)[0]
    slash, colon = ref.rfind("/"), ref.rfind(":")
    return ref[:colon] if colon > slash else ref


def node(name: str, platform: str = "linux/amd64") -> client.V1Node:
    """A Node kwok manages: it reports it Ready with room for 1,000 pods, its ``nodeInfo`` naming
    ``platform`` (``os/architecture``), as a kubelet does (stages/node-initialize.yaml)."""
    os_, arch = platform.split("/")[:2]
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": os_,
        "kubernetes.io/arch": arch,
        "type": "kwok",
    }
    return client.V1Node(
        metadata=client.V1ObjectMeta(name=name, annotations={NODE_ANNOTATION: "fake"}, labels=labels)
    )


class KubeletStages:
    """The Stage objects in one cluster, rendered from stages/*.yaml with the tests' knobs."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api
        self._lock = threading.Lock()
        self.broken: list[str] = []
        self.image_ids: dict[str, str] = {}
        self.ready_delay = 0.0  # seconds before a pod becomes Ready (set_ready_delay)
        self.touches = 0  # how many times touch() annotated the Stages

    def install(self, timeout: float = 30.0) -> None:
        """Create the Stage CRD (kwok's own, from the build) and the Stage objects."""
        crd = yaml.safe_load((bin_dir() / STAGE_CRD).read_text())
        ext = client.ApiextensionsV1Api(self._api)
        ext.create_custom_resource_definition(crd)
        deadline = time.monotonic() + timeout
        while True:
            got = ext.read_custom_resource_definition(crd["metadata"]["name"])
            conditions = (got.status.conditions if got.status else None) or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {crd['metadata']['name']} not Established in {timeout} s")
            time.sleep(0.05)
        self._apply_all()

    def touch(self) -> None:
        """Annotate every Stage, giving each a new resourceVersion, so that kwok reads them all again.

        kwok v0.8.0 caches its list of Stages by its informer's last resourceVersion
        (pkg/config/resources/cache.go), and client-go's reflector records that version before the
        listed objects reach the informer's store. A read between the two caches an empty or partial
        list under the new version, and kwok plays no Stage (or only some: the node's, not the pods')
        until a Stage changes. Touching a node does not help: with no Stage for nodes, kwok does not
        watch them. Seen in CI (stops 39 and 50): kwok started, no stage controller, the node
        NotReady for 180 s; reproduced with a kwok built to make that read (stop 51)."""
        objects = client.CustomObjectsApi(self._api)
        with self._lock:
            self.touches += 1
            body = {"metadata": {"annotations": {"tagpin.dev/touched": str(self.touches)}}}
            for stage in self.rendered():
                objects.patch_cluster_custom_object(GROUP, VERSION, PLURAL, stage["metadata"]["name"], body)

    def break_image(self, text: str) -> None:
        """Pods with a container image containing ``text`` (a digest, a reference) never get Ready."""
        with self._lock:
            if text not in self.broken:
                self.broken.append(text)
            self._apply_all()

    def set_image_id(self, image: str, digest_or_image_id: str | None) -> None:
        """Pods running ``image`` (a tag) report this digest (``sha256:...``) or full imageID (with
        ``@``, e.g. ``docker-pullable://repo@sha256:...``); ``None`` forgets it."""
        with self._lock:
            if digest_or_image_id is None:
                self.image_ids.pop(image, None)
            elif "@" in digest_or_image_id:
                self.image_ids[image] = digest_or_image_id
            else:
                self.image_ids[image] = f"{image_repo(image)}@{digest_or_image_id}"
            self._apply_all()

    def repair_image(self, text: str) -> None:
        """Pods with ``text`` in an image become Ready again (those that start after the call)."""
        with self._lock:
            if text in self.broken:
                self.broken.remove(text)
            self._apply_all()

    def set_ready_delay(self, seconds: float) -> None:
        """Pods become Ready ``seconds`` after they are bound (kwok's Stage ``delay``), as if their
        images took that long to pull and start: each rollout takes about that long per pod."""
        with self._lock:
            self.ready_delay = max(0.0, seconds)
            self._apply_all()

    def reset(self) -> None:
        with self._lock:
            self.broken.clear()
            self.image_ids.clear()
            self.ready_delay = 0.0
            self._apply_all()

    def rendered(self) -> list[dict[str, Any]]:
        # JSON strings are valid jq and Go template string literals.
        replacements = {
            "TAGPIN_BROKEN": json.dumps(self.broken),
            "TAGPIN_IMAGE_IDS": " ".join(json.dumps(s) for kv in sorted(self.image_ids.items()) for s in kv),
        }
        stages = [
            _fill(yaml.safe_load((STAGES_DIR / name).read_text()), replacements) for name in STAGE_FILES
        ]
        if self.ready_delay > 0:
            for stage in stages:
                if stage["metadata"]["name"] == "pod-ready":
                    stage["spec"]["delay"] = {"durationMilliseconds": round(self.ready_delay * 1000)}
        return stages

    def _apply_all(self) -> None:
        objects = client.CustomObjectsApi(self._api)
        for stage in self.rendered():
            name = stage["metadata"]["name"]
            try:
                current = cast(
                    dict[str, Any], objects.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
                )
            except ApiException as e:
                if e.status != 404:
                    raise
                objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, stage)
                continue
            if current.get("spec") != stage["spec"]:
                stage["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                objects.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, stage)
