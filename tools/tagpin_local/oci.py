"""A tiny OCI image pusher for tests and the demo (no docker daemon needed).

Uploads a layer blob and a config blob (monolithic POST + PUT), then an OCI image manifest under the
tag, or one manifest per platform plus an OCI image index under the tag, optionally with BuildKit-style
attestation manifests (provenance; platform ``unknown/unknown``) next to the platform manifests.
``put_tags`` puts a pushed manifest under many more tags (manifest PUTs only, in parallel).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
IN_TOTO = "application/vnd.in-toto+json"
SLSA_PROVENANCE = "https://slsa.dev/provenance/v0.2"


class RegistryAuth(httpx.Auth):
    """Credentials for pushing to a registry that asks for them: Basic (htpasswd) answered directly,
    Bearer through the challenge's token realm for the scope asked (cached per scope)."""

    requires_response_body = True

    def __init__(self, username: str, password: str) -> None:
        self._basic = httpx.BasicAuth(username, password)
        self._tokens: dict[str, str] = {}

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        response = yield request
        if response.status_code != 401:
            return
        challenge = response.headers.get("www-authenticate", "")
        scheme, _, rest = challenge.partition(" ")
        if scheme.lower() == "basic":
            yield from self._basic.auth_flow(request)
            return
        params = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        scope = params.get("scope", "")
        token = self._tokens.get(scope)
        if token is None:
            query = {k: params[k] for k in ("service", "scope") if k in params}
            token_request = httpx.Request("GET", params["realm"], params=query)
            token_request = next(self._basic.auth_flow(token_request))
            answer = yield token_request
            answer.read()
            _check(answer, f"fetching a push token from {params['realm']}")
            token = self._tokens[scope] = str(answer.json()["token"])
        request.headers["Authorization"] = f"Bearer {token}"
        yield request


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _check(response: httpx.Response, what: str) -> httpx.Response:
    if response.status_code >= 300:
        raise RuntimeError(f"{what} failed: HTTP {response.status_code} {response.text[:300]}")
    return response


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def upload_blob(http: httpx.Client, base: str, repository: str, data: bytes) -> dict[str, Any]:
    """Monolithic upload; returns the descriptor fields ``digest`` and ``size``."""
    digest = _sha256(data)
    start = _check(http.post(f"{base}/v2/{repository}/blobs/uploads/"), f"starting upload to {repository}")
    location = httpx.URL(base).join(start.headers["location"])
    location = location.copy_merge_params({"digest": digest})
    headers = {"Content-Type": "application/octet-stream"}
    _check(http.put(location, content=data, headers=headers), f"uploading blob {digest}")
    return {"digest": digest, "size": len(data)}


def put_manifest(
    http: httpx.Client, base: str, repository: str, reference: str, body: bytes, *, media_type: str
) -> str:
    """PUT a manifest; returns the digest the registry reports (computed locally if it reports none)."""
    response = _check(
        http.put(
            f"{base}/v2/{repository}/manifests/{reference}",
            content=body,
            headers={"Content-Type": media_type},
        ),
        f"putting manifest {repository}:{reference}",
    )
    reported: str = response.headers.get("docker-content-digest") or _sha256(body)
    return reported


def _image_manifest(
    http: httpx.Client, base: str, repository: str, layer: dict[str, Any], platform: dict[str, str]
) -> bytes:
    config = {
        "architecture": platform["architecture"],
        "os": platform["os"],
        **({"variant": platform["variant"]} if "variant" in platform else {}),
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]},
    }
    config_desc = upload_blob(http, base, repository, _canonical(config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, **config_desc},
        "layers": [{"mediaType": OCI_LAYER, **layer}],
    }
    return _canonical(manifest)


def _attestation_manifest(
    http: httpx.Client, base: str, repository: str, subject: str, statement: bytes
) -> bytes:
    """An attestation manifest as BuildKit writes it: an in-toto provenance layer for ``subject``."""
    config_desc = upload_blob(
        http, base, repository, _canonical({"architecture": "unknown", "os": "unknown"})
    )
    body = _canonical(
        {"_type": "https://in-toto.io/Statement/v0.1", "subject": subject, "note": statement.hex()}
    )
    layer = upload_blob(http, base, repository, body)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, **config_desc},
        "layers": [
            {"mediaType": IN_TOTO, **layer, "annotations": {"in-toto.io/predicate-type": SLSA_PROVENANCE}}
        ],
    }
    return _canonical(manifest)


def _platform(text: str) -> dict[str, str]:
    parts = text.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError(f"platform must be os/arch[/variant], got {text!r}")
    out = {"os": parts[0], "architecture": parts[1]}
    if len(parts) == 3:
        out["variant"] = parts[2]
    return out


def push_image(
    registry_url: str,
    repository: str,
    tag: str,
    *,
    content: bytes | None = None,
    platforms: list[str] | None = None,
    attestation: bytes | None = None,
    auth: tuple[str, str] | None = None,
    http: httpx.Client | None = None,
) -> str:
    """Push a small image (random layer unless ``content`` is given); returns the tag's digest.

    With ``platforms`` (e.g. ``["linux/amd64", "linux/arm64"]``) every platform gets its own manifest
    and the tag points at an OCI image index; the index digest is returned. With ``attestation`` too,
    the index also lists, per platform, an attestation manifest carrying that statement (as BuildKit's
    provenance does: platform ``unknown/unknown``, ``vnd.docker.reference.type: attestation-manifest``).
    The same ``content`` and platforms with another statement give an index that differs only in its
    attestations. ``auth`` (username, password) answers a registry's Basic or Bearer challenge.
    """
    base = registry_url.rstrip("/")
    client = http or httpx.Client(timeout=30.0, auth=RegistryAuth(*auth) if auth else None)
    try:
        layer = upload_blob(client, base, repository, os.urandom(256) if content is None else content)
        if not platforms:
            body = _image_manifest(client, base, repository, layer, {"os": "linux", "architecture": "amd64"})
            return put_manifest(client, base, repository, tag, body, media_type=OCI_MANIFEST)
        entries: list[dict[str, Any]] = []
        for text in platforms:
            platform = _platform(text)
            body = _image_manifest(client, base, repository, layer, platform)
            digest = put_manifest(client, base, repository, _sha256(body), body, media_type=OCI_MANIFEST)
            entries.append(
                {"mediaType": OCI_MANIFEST, "digest": digest, "size": len(body), "platform": platform}
            )
        if attestation is not None:
            for subject in [str(e["digest"]) for e in entries]:
                body = _attestation_manifest(client, base, repository, subject, attestation)
                digest = put_manifest(client, base, repository, _sha256(body), body, media_type=OCI_MANIFEST)
                entries.append(
                    {
                        "mediaType": OCI_MANIFEST,
                        "digest": digest,
                        "size": len(body),
                        "platform": {"architecture": "unknown", "os": "unknown"},
                        "annotations": {
                            "vnd.docker.reference.digest": subject,
                            "vnd.docker.reference.type": "attestation-manifest",
                        },
                    }
                )
        index = _canonical({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
        return put_manifest(client, base, repository, tag, index, media_type=OCI_INDEX)
    finally:
        if http is None:
            client.close()


def put_tags(
    registry_url: str, repository: str, source: str, tags: Sequence[str], *, workers: int = 16
) -> str:
    """Tag the manifest ``repository:source`` (pushed already, e.g. by ``push_image``) with every
    tag in ``tags``: one manifest PUT each, ``workers`` at a time (about 450 a second against the
    local registry on 2 cores). Returns the manifest's digest."""
    base = registry_url.rstrip("/")
    with httpx.Client(timeout=30.0) as http:
        got = _check(
            http.get(
                f"{base}/v2/{repository}/manifests/{source}",
                headers={"Accept": f"{OCI_MANIFEST}, {OCI_INDEX}"},
            ),
            f"getting manifest {repository}:{source}",
        )
    body, media_type = got.content, got.headers["content-type"].split(";", 1)[0].strip()

    def put(chunk: Sequence[str]) -> set[str]:
        with httpx.Client(timeout=30.0) as client:
            return {put_manifest(client, base, repository, tag, body, media_type=media_type) for tag in chunk}

    workers = max(1, min(workers, len(tags)))
    with ThreadPoolExecutor(workers) as pool:
        digests = set().union(*pool.map(put, [tags[i::workers] for i in range(workers)]))
    digest = _sha256(body)
    if digests - {digest}:
        raise RuntimeError(f"the registry reported other digests than {digest} for one manifest: {digests}")
    return digest
