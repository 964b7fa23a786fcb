"""What each parser keeps, drops and refuses, beyond the samples."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from tagpin.adapters.webhooks import (
    acr,
    artifactory,
    dockerhub,
    ecr,
    gar,
    generic,
    github,
    harbor,
    nexus,
    quay,
)
from tagpin.ports.webhooks import PushEvent, SourceOptions, WebhookError

from tests.support.webhooks import SAMPLE_DIGEST, http_parts, sample


def sample_body(name: str) -> dict[str, Any]:
    _, event, _ = sample(name)
    body: dict[str, Any] = json.loads(http_parts(event)[2]) if "body" in event else event
    return body


def enc(document: Any) -> bytes:
    return json.dumps(document).encode()


def refused(parse: Any, body: bytes, *args: Any) -> str:
    with pytest.raises(WebhookError) as caught:
        parse(body, *args)
    assert caught.value.status == 400
    return caught.value.message


def test_dockerhub() -> None:
    doc = sample_body("dockerhub")
    doc["push_data"]["tag"] = ""
    assert dockerhub.parse(enc(doc), {}) == []
    del doc["push_data"]
    assert "push_data" in refused(dockerhub.parse, enc(doc), {})
    doc = sample_body("dockerhub")
    doc["push_data"]["pushed_at"] = 10**20  # out of range: no time, not an error
    (push,) = dockerhub.parse(enc(doc), {})
    assert push.event_time is None


def test_harbor_drops_other_types_and_digest_only_pushes() -> None:
    doc = sample_body("harbor-default")
    assert [p.tag for p in harbor.parse(enc(doc), {})] == ["stable"]
    assert harbor.parse(enc({**doc, "type": "PULL_ARTIFACT"}), {}) == []
    assert harbor.parse(enc({**doc, "type": "DELETE_ARTIFACT"}), {}) == []
    cloud = sample_body("harbor-cloudevents")
    del cloud["data"]
    assert "data" in refused(harbor.parse, enc(cloud), {})
    doc["event_data"]["resources"][0]["resource_url"] = "nohost:stable"
    assert "resource_url" in refused(harbor.parse, enc(doc), {})


def test_github_keeps_tagged_container_versions_only() -> None:
    body = sample_body("github-package")
    h = {"x-github-event": "package", "x-github-delivery": "d-1"}
    (push,) = github.parse(enc(body), h)
    assert (push.registry, push.repository, push.tag, push.digest, push.delivery_id) == (
        "ghcr.io",
        "demo/web",
        "stable",
        SAMPLE_DIGEST,
        "d-1",
    )
    assert push.event_time == "2025-11-21T05:20:00Z"  # the zero time of package_version is skipped
    assert github.parse(enc(body), {"x-github-event": "ping"}) == []
    assert github.parse(b"not even json", {"x-github-event": "ping"}) == []
    assert github.parse(enc({**body, "action": "deleted"}), h) == []
    npm = json.loads(json.dumps(body))
    npm["package"]["package_type"] = "npm"
    assert github.parse(enc(npm), h) == []
    untagged = json.loads(json.dumps(body))
    untagged["package"]["package_version"]["container_metadata"]["tag"]["name"] = ""
    assert github.parse(enc(untagged), h) == []
    upper = json.loads(json.dumps(body))
    upper["package"]["package_version"]["package_url"] = "ghcr.io/Demo/Web:stable"
    assert github.parse(enc(upper), h)[0].repository == "demo/web"
    nested = json.loads(json.dumps(body))
    nested["package"]["package_version"]["package_url"] = "ghcr.io/demo/tools/web:stable"
    assert github.parse(enc(nested), h)[0].repository == "demo/tools/web"
    assert "registry_package" in refused(github.parse, enc(body), {"x-github-event": "registry_package"})
    # Every GitHub delivery names its event: one without the header is malformed (400), as other
    # sources' malformed deliveries are, not accepted with nothing done.
    assert "X-GitHub-Event" in refused(github.parse, enc(body), {"x-github-delivery": "d-1"})
    assert "X-GitHub-Event" in refused(github.parse, enc(body), {"x-github-event": "  "})


def test_quay_one_event_per_distinct_tag() -> None:
    doc = sample_body("quay")
    doc["updated_tags"] = ["a", "b", "a", ""]
    assert [p.tag for p in quay.parse(enc(doc), {})] == ["a", "b"]
    doc["updated_tags"] = [str(i) for i in range(quay.MAX_TAGS + 1)]
    refused(quay.parse, enc(doc), {})
    doc["updated_tags"], doc["docker_url"] = ["a"], "https://quay.example.com/demo/web"
    assert quay.parse(enc(doc), {})[0].registry == "quay.example.com"


def test_acr_forms() -> None:
    hook = sample_body("acr-webhook")
    assert acr.parse(enc({**hook, "action": "chart_push"}), {}) == []
    assert acr.parse(enc({**hook, "action": "delete"}), {}) == []
    no_tag = json.loads(json.dumps(hook))
    del no_tag["target"]["tag"]
    assert acr.parse(enc(no_tag), {}) == []
    no_host = json.loads(json.dumps(hook))
    del no_host["request"]
    assert "request.host" in refused(acr.parse, enc(no_host), {})
    cloud = {
        "specversion": "1.0",
        "type": acr.PUSHED,
        "id": "c-1",
        "time": "2026-01-01T00:00:00Z",
        "data": hook,
    }
    (push,) = acr.parse(enc(cloud), {})
    assert (push.delivery_id, push.event_time) == ("c-1", "2026-01-01T00:00:00Z")
    validation = [
        {
            "id": "v",
            "eventType": acr.VALIDATION,
            "data": {"validationCode": "x", "validationUrl": "https://v"},
        }
    ]
    assert acr.parse(enc(validation), {}) == []
    refused(acr.parse, enc([{"eventType": acr.PUSHED, "data": hook}] * (acr.MAX_EVENTS + 1)), {})


def test_artifactory_pull_prefix() -> None:
    doc = sample_body("artifactory")
    (push,) = artifactory.parse(enc(doc), {})  # default: repository-path access method
    assert (push.registry, push.repository, push.digest) == (
        "acme.jfrog.io",
        "docker-local/demo/web",
        SAMPLE_DIGEST,
    )
    sub = SourceOptions(registries={"docker-local": "docker-local.acme.jfrog.io"})
    assert artifactory.parse(enc(doc), {}, sub)[0].registry == "docker-local.acme.jfrog.io"
    legacy = sample_body("artifactory-legacy-signed")
    assert "jpd_origin" in refused(artifactory.parse, enc(legacy), {})
    assert artifactory.parse(enc({**doc, "event_type": "deleted"}), {}) == []
    assert artifactory.parse(enc({**doc, "domain": "artifact"}), {}) == []
    doc["data"]["sha256"] = "not-hex"
    assert artifactory.parse(enc(doc), {})[0].digest is None


def test_nexus_needs_a_configured_pull_host() -> None:
    doc = sample_body("nexus")
    h = {"x-nexus-webhook-id": "rm:repository:component"}
    assert "registries" in refused(nexus.parse, enc(doc), h)
    every = SourceOptions(registries={"*": "nexus.example.com:8443/prefix"})
    (push,) = nexus.parse(enc(doc), h, every)
    assert (push.registry, push.repository, push.tag) == (
        "nexus.example.com:8443",
        "prefix/demo/web",
        "stable",
    )
    assert nexus.parse(enc(doc), {"x-nexus-webhook-id": "rm:repository:asset"}, every) == []
    assert nexus.parse(enc({**doc, "action": "DELETED"}), h, every) == []
    maven = json.loads(json.dumps(doc))
    maven["component"]["format"] = "maven2"
    assert nexus.parse(enc(maven), h, every) == []


def test_gar_messages() -> None:
    doc = sample_body("gar-pubsub")
    message = json.loads(base64.b64decode(doc["message"]["data"]))

    def wrapped(msg: Any) -> bytes:
        return enc(
            {
                **doc,
                "message": {**doc["message"], "data": base64.b64encode(json.dumps(msg).encode()).decode()},
            }
        )

    assert gar.parse(wrapped({**message, "action": "DELETE"}), {}) == []
    assert (
        gar.parse(wrapped({"action": "INSERT", "digest": message["digest"]}), {}) == []
    )  # digest-only upload
    other = {**message, "digest": "europe-west1-docker.pkg.dev/proj/repo/other@" + SAMPLE_DIGEST}
    assert gar.parse(wrapped(other), {})[0].digest is None  # a digest of another image is no hint
    assert "base64" in refused(gar.parse, enc({**doc, "message": {"data": "%%%"}}), {})
    refused(gar.parse, wrapped({**message, "tag": "Not A Reference"}), {})
    refused(gar.parse, wrapped({**message, "tag": message["digest"]}), {})
    refused(gar.parse, enc({"subscription": "x"}), {})


def test_generic() -> None:
    (a, b) = generic.parse(
        enc([{"image": "reg.example.com/a/b:1"}, {"image": f"nginx:1.27@{SAMPLE_DIGEST}", "id": "x"}]), {}
    )
    assert (a.registry, a.repository, a.tag, a.digest, a.delivery_id) == (
        "reg.example.com",
        "a/b",
        "1",
        None,
        None,
    )
    assert (b.registry, b.repository, b.tag, b.digest, b.delivery_id) == (
        "docker.io",
        "library/nginx",
        "1.27",
        SAMPLE_DIGEST,
        "x",
    )
    assert generic.parse(enc({"image": "reg.example.com/a/b"}), {})[0].tag == "latest"
    assert (
        generic.parse(enc({"image": f"reg.example.com/a/b:1@{SAMPLE_DIGEST}"}), {})[0].digest == SAMPLE_DIGEST
    )
    refused(generic.parse, enc({"image": "reg.example.com/Upper/case"}), {})
    refused(generic.parse, enc([{"image": "a/b"}] * (generic.MAX_IMAGES + 1)), {})
    refused(generic.parse, enc({"digest": SAMPLE_DIGEST}), {})


def test_generic_digest_only_reference_is_refused() -> None:
    assert "tag" in refused(generic.parse, enc({"image": f"reg.example.com/a/b@{SAMPLE_DIGEST}"}), {})


def test_ecr() -> None:
    event = sample_body("ecr")
    assert ecr.is_ecr_event(event) and not ecr.is_ecr_event({"source": "aws.ecr"})
    for change in ({"action-type": "DELETE"}, {"result": "FAILURE"}, {"image-tag": None}):
        assert ecr.parse(enc({**event, "detail": {**event["detail"], **change}}), {}) == []
    (push,) = ecr.parse(enc({**event, "region": "cn-north-1"}), {})
    assert push.registry == "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn"
    refused(ecr.parse, enc({**event, "source": "aws.s3"}), {})
    refused(ecr.parse, enc({**event, "account": "evil.example.com/x"}), {})


def test_push_event_fields_are_what_the_service_needs() -> None:
    assert set(PushEvent.__dataclass_fields__) == {
        "registry",
        "repository",
        "tag",
        "digest",
        "event_time",
        "delivery_id",
    }
