"""``images``: the followed tags and the workload containers (targets) that run them."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from tagpin.domain.config.base import CONTAINER_PATTERN, LABEL_PATTERN, NAME_PATTERN, Strict
from tagpin.domain.refs import ImageRef, InvalidReference


class Kind(StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"
    DAEMONSET = "DaemonSet"
    CRONJOB = "CronJob"


class Target(Strict):
    """A container of a workload that runs the followed tag."""

    cluster: str = Field(description="A name under `clusters`.")
    namespace: Annotated[str, Field(pattern=LABEL_PATTERN, max_length=63)] = Field(
        default="default", description="Namespace of the workload."
    )
    kind: Kind = Field(default=Kind.DEPLOYMENT, description="Workload kind.")
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=253)] = Field(description="Workload name.")
    container: Annotated[str, Field(pattern=CONTAINER_PATTERN, max_length=63)] = Field(
        description="Container (or init container) whose image follows the tag."
    )

    @property
    def id(self) -> str:
        return f"{self.cluster}/{self.namespace}/{self.kind.value}/{self.name}/{self.container}"


class FollowedImage(Strict):
    image: str = Field(
        description="The followed tag, e.g. `registry.example.com/team/web:stable` (no digest)."
    )
    targets: list[Target] = Field(min_length=1, description="Where it runs.")

    @field_validator("image")
    @classmethod
    def _tagged_reference(cls, value: str) -> str:
        try:
            ref = ImageRef.parse(value)
        except InvalidReference as exc:
            raise ValueError(str(exc)) from None
        if ref.digest is not None:
            raise ValueError(f"{value!r} is pinned to a digest; follow a tag (e.g. 'repo:stable')")
        return ref.tagged

    @property
    def ref(self) -> ImageRef:
        return ImageRef.parse(self.image)
