# Verbatim: layers/common/tagpin/domain/gitops/writes.py at 8d50e8c, the last version before write
# requests carried the move (see tests/support/deployed/__init__.py). Do not edit.
# ruff: noqa: I001 (its imports sorted as the library sorts them)

"""A write to Git: what the consumer asks the write-back function to write (docs/gitops.md).

The consumer decides (waves, windows, approvals, trust gates, the ordering claim), then, for the
targets a GitOps tool owns and ``gitops.write_back`` configures, sends one ``WriteRequest`` per
repository and branch: the reference every listed file is made to say, and the targets whose
workloads it moves. The write-back function reads them from a FIFO queue whose message group is
the repository, so the writers of one repository run one after the other and never block another
repository's.

- ``pin``: the followed tag at its new digest (``repo:1.4@sha256:...``).
- ``revert``: after the digest failed (the verifier), the reference the workload ran before
  (``previous_image``), written back the same way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tagpin.domain.config.gitops import FileKind, WriteBackFile, WriteMode
from tagpin.domain.gitops import helm, kustomize, manifest
from tagpin.domain.gitops.pins import Pin
from tagpin.domain.gitops.yamltext import Edit
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import ImageRef, InvalidReference, is_digest

MAX_GROUP = 128  # SQS's limit on a MessageGroupId


class WriteKind(StrEnum):
    PIN = "pin"  # the tag's new digest
    REVERT = "revert"  # the previous reference, after the digest failed


class WriteOutcome(StrEnum):
    """What became of a write request."""

    COMMITTED = "committed"
    UNCHANGED = "unchanged"  # the files already said it: no commit, no empty commit
    SUPERSEDED = "superseded"  # no target still waits for it (a newer digest, already written)
    FAILED = "failed"  # cannot be written as configured: recorded on its targets, not retried
    RETRY = "retry"  # the server or the credentials refused, nothing written: delivered again later
    REQUESTED = "requested"  # pull-request mode: pushed to tagpin's branch, a request to merge it open
    DECLINED = "declined"  # pull-request mode: a person closed tagpin's request unmerged: targets held


@dataclass(frozen=True)
class Written:
    outcome: WriteOutcome
    commit: str | None = None  # the commit written, or the head that already said it
    detail: str = ""
    targets: tuple[str, ...] = ()


class FileWrite(BaseModel):
    """A file of the repository and the targets whose reference it carries."""

    model_config = ConfigDict(frozen=True)

    file: WriteBackFile
    targets: tuple[str, ...] = Field(min_length=1, max_length=1000)


class WriteRequest(BaseModel):
    """The body of a message on the write-back queue."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: WriteKind
    repository: str = Field(min_length=8, max_length=1024)
    branch: str = Field(min_length=1, max_length=200)
    mode: WriteMode = WriteMode.COMMIT
    image: str = Field(min_length=3, max_length=512)  # the followed image (the state's key)
    # pin: the digest written; revert: the digest that failed (the targets' claim holds it)
    digest: str
    reference: str = Field(min_length=3, max_length=1024)  # registry/repo:tag@digest, as written
    observed_at: int = Field(ge=0)
    trigger: Trigger
    correlation_id: str | None = Field(default=None, max_length=256)
    reason: str | None = Field(default=None, max_length=2000)  # revert: why the digest failed
    # pin: what each target ran before (recorded with the commit: what a revert writes back)
    previous: dict[str, str] = Field(default_factory=dict, max_length=1000)
    # pin: who applies each target's workload (``Argo CD Application shop``), for its detail
    owners: dict[str, str] = Field(default_factory=dict, max_length=1000)
    files: tuple[FileWrite, ...] = Field(min_length=1, max_length=100)

    @model_validator(mode="after")
    def _pinned(self) -> Self:
        if not is_digest(self.digest):
            raise ValueError(f"digest {self.digest!r} is not a valid digest")
        self.pin()  # a reference with a tag and a digest (a revert's: a tag at least)
        return self

    def pin(self) -> Pin:
        """What the files are made to say: a pin names a tag and a digest; a revert names what
        the file said before, which may be the tag alone (``Pin.pinned`` False)."""
        try:
            ref = ImageRef.parse(self.reference)
        except InvalidReference as exc:
            raise ValueError(str(exc)) from None
        if ref.tag is None or (ref.digest is None and self.kind is WriteKind.PIN):
            raise ValueError(f"{self.reference!r}: a reference written to Git names a tag and a digest")
        return Pin(ref)

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for f in self.files for t in f.targets))

    @property
    def group(self) -> str:
        """The FIFO message group: the repository (its hash when longer than SQS allows)."""
        url = self.repository
        return url if len(url) <= MAX_GROUP else hashlib.sha256(url.encode()).hexdigest()


def edit_file(text: str, pin: Pin, file: WriteBackFile) -> Edit:
    """``text`` made to say ``pin`` as ``file`` says how (``EditError`` when it cannot)."""
    if file.kind is FileKind.KUSTOMIZE:
        return kustomize.edit(text, pin, name=file.name)
    if file.kind is FileKind.HELM:
        assert file.tag is not None  # validated: a helm file names its tag's path
        return helm.edit(text, pin, helm.ValuesPaths(file.tag, file.digest, file.repository))
    if file.marker is not None:
        return manifest.edit_by_marker(text, pin, file.marker)
    return manifest.edit_by_name(text, pin)
