"""Argo Rollouts as a workload kind: the JSON patch the adapter sends for tagpin's change (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin.adapters.kubernetes.rollouts import json_patch
from tagpin.domain.config import Kind
from tagpin.usecases.patch import image_patch
from tagpin_local.kubesim import json_patch as apply_json_patch
from tagpin_local.kubesim import rollout, strategic_merge

from tests.support.constants import D1

NOTES = {"tagpin.dev/digests": '{"app":"' + D1 + '"}', "tagpin.dev/trigger": "poll"}


def manifest(**template_metadata: Any) -> dict[str, Any]:
    obj = rollout("web", "shop", "nginx:1.27")
    pod = obj["spec"]["template"]
    pod["metadata"] = template_metadata
    pod["spec"]["initContainers"] = [{"name": "migrate", "image": "nginx:1.27"}]
    pod["spec"]["containers"].insert(
        0, {"name": "sidecar", "image": "envoy:1.30", "ports": [{"containerPort": 1}]}
    )
    obj["metadata"]["resourceVersion"] = "41"
    return obj


@pytest.mark.parametrize(
    "template_metadata",
    [
        pytest.param({"labels": {"app": "web"}}, id="no-annotations"),
        pytest.param(
            {"labels": {"app": "web"}, "annotations": {"team": "a", "tagpin.dev/trigger": "x"}}, id="some"
        ),
        pytest.param({}, id="empty-metadata"),
    ],
)
@pytest.mark.parametrize("container", ["app", "migrate"])
def test_the_json_patch_does_what_the_strategic_merge_patch_does(template_metadata, container):
    current = manifest(**template_metadata)
    body = image_patch(Kind.ROLLOUT, "41", container, container == "migrate", f"nginx:1.27@{D1}", NOTES)
    ops = json_patch(body, current)
    assert apply_json_patch(current, ops) == strategic_merge(current, body)
    assert ops[-1] == {
        "op": "replace",
        "path": "/metadata/resourceVersion",
        "value": "41",
    }  # the precondition
    field = "initContainers" if container == "migrate" else "containers"
    index = 0 if container == "migrate" else 1
    assert {"op": "test", "path": f"/spec/template/spec/{field}/{index}/name", "value": container} in ops
    assert {
        "op": "replace",
        "path": f"/spec/template/spec/{field}/{index}/image",
        "value": f"nginx:1.27@{D1}",
    } in ops
    assert not any(op["path"].startswith("/spec/template/spec/containers/0") for op in ops)  # the sidecar


def test_annotation_keys_are_escaped_and_added_one_by_one_when_the_map_exists():
    current = manifest(annotations={"team": "a"})
    ops = json_patch(image_patch(Kind.ROLLOUT, "41", "app", False, "x", NOTES), current)
    assert {
        "op": "add",
        "path": "/spec/template/metadata/annotations/tagpin.dev~1digests",
        "value": NOTES["tagpin.dev/digests"],
    } in ops
    assert not any(op["path"] == "/spec/template/metadata/annotations" for op in ops)  # "team" stays


def test_null_removes_a_new_item_is_appended_and_an_item_needs_a_name():
    current = manifest(annotations={"team": "a"})
    body = {
        "spec": {
            "template": {
                "metadata": {"annotations": {"team": None, "gone": None}},
                "spec": {"containers": [{"name": "new", "image": "busybox"}]},
            }
        }
    }
    ops = json_patch(body, current)
    assert ops == [
        {"op": "remove", "path": "/spec/template/metadata/annotations/team"},
        {
            "op": "add",
            "path": "/spec/template/spec/containers/-",
            "value": {"name": "new", "image": "busybox"},
        },
    ]  # no resourceVersion asked: no precondition
    with pytest.raises(ValueError, match="needs a name"):
        json_patch({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}, current)
