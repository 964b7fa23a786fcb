"""``gitops``: workloads moved through Git instead of patched live (docs/gitops.md).

``write_back`` says, per followed image (and optionally per target), which repository and
branch, which files and how each writes the reference, and whether the commit goes to the branch
or to a branch for review (a pull or merge request). ``hosts`` says how to reach each Git host:
its token (a secret under ``tagpin/git/``) and, for pull requests, its API. ``patch_live`` names
the targets owned by Argo CD or Flux that may still be patched live (only there does tagpin patch
a workload a GitOps tool owns).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Self
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from tagpin.domain.channels import FollowedKey, is_channel
from tagpin.domain.config.base import GitSecretName
from tagpin.domain.gitops.helm import parse_path
from tagpin.domain.gitops.manifest import MARKER_NAME
from tagpin.domain.gitops.owners import ARGOCD_INSTANCE_LABEL, Owner, owner_of
from tagpin.domain.model import Strict
from tagpin.domain.refs import ImageRef, InvalidReference

# git check-ref-format's rules, for the characters a branch tagpin writes may use (Python's re:
# pydantic's pattern engine has no look-ahead).
BRANCH = re.compile(r"^(?!/)(?!.*(\.\.|//|@\{|\.lock$|/$|\.$|^-))[A-Za-z0-9._/-]{1,200}$")
SELECTOR = re.compile(r"^[^/\s]+/[^/\s]+/[^/\s]+/[^/\s]+$")


class GitHostKind(StrEnum):
    """Which REST API opens pull requests: GitHub (``/repos/{owner}/{repo}/pulls``) or GitLab
    (``/projects/{id}/merge_requests``); ``generic``: commits only."""

    GITHUB = "github"
    GITLAB = "gitlab"
    GENERIC = "generic"


def host_kind(host: str) -> GitHostKind:
    name = host.lower().split(":", 1)[0]
    if name == "github.com" or name.endswith(".ghe.com"):
        return GitHostKind.GITHUB
    if name == "gitlab.com":
        return GitHostKind.GITLAB
    return GitHostKind.GENERIC


class GitHost(Strict):
    credentials_secret: GitSecretName | None = Field(
        default=None,
        description='Secret named `tagpin/git/...` holding the host\'s token: JSON `{"token": ...}` '
        "(optionally `username`) or the token alone. Without it the repositories are read anonymously "
        "and a push is refused.",
    )
    kind: GitHostKind | None = Field(
        default=None, description="The host's API for pull requests; default: worked out from the host."
    )
    api_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/]+(/[^\s]*)?$",
        description="The REST API's base URL; default `https://api.github.com` for github.com, "
        "`https://<host>/api/v4` for GitLab, `https://<host>/api/v3` for GitHub Enterprise Server.",
    )
    insecure: bool = Field(default=False, description="Plain HTTP (local Git servers only).")

    def kind_for(self, host: str) -> GitHostKind:
        return self.kind or host_kind(host)

    def api_for(self, host: str) -> str | None:
        if self.api_url:
            return self.api_url.rstrip("/")
        scheme = "http" if self.insecure else "https"
        kind = self.kind_for(host)
        if kind is GitHostKind.GITHUB:
            return "https://api.github.com" if host == "github.com" else f"{scheme}://{host}/api/v3"
        if kind is GitHostKind.GITLAB:
            return f"{scheme}://{host}/api/v4"
        return None


class FileKind(StrEnum):
    KUSTOMIZE = "kustomize"
    HELM = "helm"
    MANIFEST = "manifest"


class WriteBackFile(Strict):
    """A file of the repository and how the reference is written in it (docs/gitops.md)."""

    path: str = Field(min_length=1, max_length=1024, description="Path in the repository.")
    kind: FileKind = Field(
        description="`kustomize`: an `images:` entry; `helm`: values paths; "
        "`manifest`: image fields found by name, or values marked by a comment."
    )
    name: str | None = Field(
        default=None,
        max_length=255,
        description="kustomize: the `images:` entry's `name`; default: "
        "the entry whose `newName` (or `name`) is the followed repository.",
    )
    tag: str | None = Field(default=None, description="helm: the tag's path, e.g. `image.tag` (required).")
    digest: str | None = Field(
        default=None,
        description="helm: the digest's path, e.g. `image.digest`; without it the tag path "
        "gets `tag@digest`.",
    )
    repository: str | None = Field(
        default=None, description="helm: the repository's path, checked to name the followed image."
    )
    marker: str | None = Field(
        default=None,
        pattern=MARKER_NAME,
        max_length=200,
        description='manifest: the values marked `# {"$tagpin": "<marker>"}` (`:tag`, `:digest`); '
        "default: every `image:` field that names the followed repository.",
    )

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        clean = posixpath.normpath(value)
        if value.startswith("/") or clean.startswith("..") or clean != value or "\\" in value:
            raise ValueError(f"{value!r}: a path inside the repository, relative, without ./ or ..")
        return value

    @model_validator(mode="after")
    def _fields_of_kind(self) -> Self:
        given = {f for f in ("name", "tag", "digest", "repository", "marker") if getattr(self, f) is not None}
        allowed = {
            FileKind.KUSTOMIZE: {"name"},
            FileKind.HELM: {"tag", "digest", "repository"},
            FileKind.MANIFEST: {"marker"},
        }[self.kind]
        if extra := given - allowed:
            raise ValueError(f"{', '.join(sorted(extra))}: not a field of a {self.kind.value} file")
        if self.kind is FileKind.HELM:
            if self.tag is None:
                raise ValueError("tag: a helm file needs the tag's path (e.g. image.tag)")
            for path in (self.tag, self.digest, self.repository):
                if path is not None:
                    parse_path(path)
        return self


class WriteMode(StrEnum):
    COMMIT = "commit"
    PULL_REQUEST = "pull-request"


class WriteBack(Strict):
    """Where a followed image's reference is written in Git."""

    image: FollowedKey = Field(
        description="The followed image (as under `images`, or a labelled workload's)."
    )
    targets: list[str] = Field(
        default_factory=list,
        description="Targets this applies to, `cluster/namespace/kind/name` (`*` for any part); "
        "default: every target of the image.",
    )
    repository: str = Field(description="The repository's HTTPS URL, e.g. `https://github.com/org/apps.git`.")
    branch: str = Field(default="main", description="The branch the GitOps tool deploys.")
    mode: WriteMode = Field(
        default=WriteMode.COMMIT,
        description="`commit`: to the branch; `pull-request`: to a branch `tagpin/<image>-<digest>` "
        "and a pull (merge) request to the branch through the GitHub or GitLab API, its URL recorded; "
        "the targets move once a person merges it (docs/gitops.md).",
    )
    files: list[WriteBackFile] = Field(min_length=1, max_length=100, description="The files to edit.")

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if is_channel(value):
            return value
        try:
            ref = ImageRef.parse(value)
        except InvalidReference as exc:
            raise ValueError(str(exc)) from None
        if ref.digest is not None:
            raise ValueError(f"{value!r} is pinned to a digest; name the followed tag")
        return ref.tagged

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str) -> str:
        if not BRANCH.fullmatch(value):
            raise ValueError(f"{value!r}: not a branch name (letters, digits, . _ - /; no .., //, .lock)")
        return value

    @field_validator("targets")
    @classmethod
    def _selectors(cls, value: list[str]) -> list[str]:
        for selector in value:
            if not SELECTOR.fullmatch(selector):
                raise ValueError(f"{selector!r}: a target is cluster/namespace/kind/name (* for any part)")
        return value

    @field_validator("repository")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("https", "http") or not parts.hostname or not parts.path.strip("/"):
            raise ValueError(f"{value!r}: a repository is an https:// URL (SSH is not supported)")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("a repository URL carries no credentials, query or fragment (tokens: `hosts`)")
        return value

    @property
    def host(self) -> str:
        return urlsplit(self.repository).netloc

    def applies_to(self, target: str) -> bool:
        """True for ``cluster/namespace/kind/name`` (a target id's first four parts)."""
        return not self.targets or any(_selects(s, target) for s in self.targets)


def _overlap(these: list[str], those: list[str]) -> bool:
    """True when a target may match a selector of both lists (an empty list matches every target)."""
    return any(
        all(a in ("*", b) or b == "*" for a, b in zip(x.split("/"), y.split("/"), strict=True))
        for x in these or ["*/*/*/*"]
        for y in those or ["*/*/*/*"]
    )


def _selects(selector: str, target: str) -> bool:
    parts = target.split("/")[:4]
    return len(parts) == 4 and all(s in ("*", p) for s, p in zip(selector.split("/"), parts, strict=True))


class GitAuthor(Strict):
    name: str = Field(default="tagpin", min_length=1, max_length=100, description="The commits' author name.")
    email: str = Field(
        default="tagpin@users.noreply.invalid",
        pattern=r"^[^<>\s]+@[^<>\s]+$",
        max_length=200,
        description="The commits' author e-mail address.",
    )


class GitOpsSettings(Strict):
    hosts: dict[str, GitHost] = Field(
        default_factory=dict, description="Per Git host (`host[:port]`): token and API."
    )
    write_back: list[WriteBack] = Field(
        default_factory=list, description="Where each followed image is written in Git."
    )
    patch_live: list[str] = Field(
        default_factory=list,
        description="Targets (`cluster/namespace/kind/name`, `*` for any part) that Argo CD or Flux "
        "owns and tagpin may still patch live (its change is then reverted by the tool unless "
        "it ignores the field).",
    )
    argocd_instance_label: str | None = Field(
        default=ARGOCD_INSTANCE_LABEL,
        pattern=r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$",
        description="The label Argo CD tracks its applications by (argocd-cm's "
        "`application.instanceLabelKey`); `null` when Argo CD tracks by annotation only. A workload "
        "Helm installed itself (annotated `meta.helm.sh/release-name`) is not taken for Argo CD's.",
    )
    author: GitAuthor = Field(default_factory=GitAuthor, description="Author of tagpin's commits.")

    @field_validator("patch_live")
    @classmethod
    def _selectors(cls, value: list[str]) -> list[str]:
        return WriteBack._selectors(value)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        seen: dict[tuple[Any, ...], int] = {}
        for i, entry in enumerate(self.write_back):
            host = self.hosts.get(entry.host, GitHost())
            if urlsplit(entry.repository).scheme == "http" and not host.insecure:
                raise ValueError(f"write_back.{i}.repository: plain http needs hosts.{entry.host}.insecure")
            if entry.mode is WriteMode.PULL_REQUEST and host.kind_for(entry.host) is GitHostKind.GENERIC:
                raise ValueError(
                    f"write_back.{i}.mode: pull requests need a GitHub or GitLab host; set "
                    f"hosts.{entry.host}.kind"
                )
            for k, other in enumerate(self.write_back[:i]):
                if (other.image, other.repository, other.branch) != (
                    entry.image,
                    entry.repository,
                    entry.branch,
                ) and (other.image == entry.image and _overlap(other.targets, entry.targets)):
                    raise ValueError(
                        f"write_back.{i}: a target's reference is written to one repository and branch, "
                        f"and write_back.{k} already writes {entry.image} for some of its targets to "
                        f"{other.repository}#{other.branch} (name the targets of each)"
                    )
            for j, file in enumerate(entry.files):
                for target in entry.targets or ["*/*/*/*"]:
                    key = (entry.image, target, entry.repository, entry.branch, file.path)
                    if key in seen:
                        raise ValueError(
                            f"write_back.{i}.files.{j}: {file.path} of {entry.repository} is already written "
                            f"for {entry.image} by write_back.{seen[key]}"
                        )
                    seen[key] = i
        return self

    def for_target(self, image: FollowedKey, target: str) -> list[WriteBack]:
        """The write-back entries of ``image`` that apply to ``target``."""
        return [w for w in self.write_back if w.image == image and w.applies_to(target)]

    def live_allowed(self, target: str) -> bool:
        """True when ``patch_live`` names the target (``cluster/namespace/kind/name[/container]``)."""
        return any(_selects(s, target) for s in self.patch_live)

    def owner_of(self, labels: Mapping[str, str], annotations: Mapping[str, str]) -> Owner | None:
        """The GitOps tool that owns a workload (``tagpin.domain.gitops.owners``)."""
        return owner_of(labels, annotations, instance_label=self.argocd_instance_label)
