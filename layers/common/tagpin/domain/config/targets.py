"""``images``: the followed tags and version channels, and the workload containers (targets) that
run them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from tagpin.domain.channels import NAME_PATTERN as CHANNEL_PATTERN
from tagpin.domain.channels import ChannelKey, FollowedKey, is_channel
from tagpin.domain.config.base import CONTAINER_PATTERN, LABEL_PATTERN, NAME_PATTERN
from tagpin.domain.config.signatures import SignaturesField
from tagpin.domain.kinds import DEFAULT_KIND, Kind
from tagpin.domain.model import Strict
from tagpin.domain.refs import ImageRef, InvalidReference
from tagpin.domain.versions import InvalidPolicy, PolicyKind, VersionPolicy


def _policy(value: Any) -> Any:
    """A policy in its compact form (``~1.4``, ``numeric``) or as its fields."""
    if isinstance(value, str):
        try:
            return VersionPolicy.parse(value)
        except InvalidPolicy as exc:
            raise ValueError(str(exc)) from None
    return value


class Target(Strict):
    """A container of a workload that runs the followed tag."""

    cluster: str = Field(description="A name under `clusters`.")
    namespace: Annotated[str, Field(pattern=LABEL_PATTERN, max_length=63)] = Field(
        default="default", description="Namespace of the workload."
    )
    kind: Kind = Field(default=DEFAULT_KIND, description="Workload kind.")
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=253)] = Field(description="Workload name.")
    container: Annotated[str, Field(pattern=CONTAINER_PATTERN, max_length=63)] = Field(
        description="Container (or init container) whose image follows the tag."
    )

    @property
    def id(self) -> str:
        return f"{self.cluster}/{self.namespace}/{self.kind.value}/{self.name}/{self.container}"


class FollowedImage(Strict):
    """A followed tag, or a version channel of a repository (``policy``), and where it runs."""

    image: FollowedKey = Field(
        description="The followed tag, e.g. `registry.example.com/team/web:stable` (no digest); with a "
        "version `policy`, the repository, e.g. `registry.example.com/team/web` (no tag)."
    )
    policy: Annotated[VersionPolicy | None, BeforeValidator(_policy)] = Field(
        default=None,
        description="Follow the newest version this policy allows instead of one tag: a compact form "
        "(`~1.4`, `semver:^2`, `numeric`, `calver`, `regex:^build-(?P<version>\\d+)$`) or its fields "
        "(`kind`, `range`, `prereleases`, `include`, `exclude`, `floor`, `ceiling`, `pattern`, "
        "`order`); docs/policies.md. The targets are pinned to `repository:<version>@<digest>`.",
    )
    channel: Annotated[str, Field(pattern=CHANNEL_PATTERN)] | None = Field(
        default=None,
        description="A name for this version channel (`candidate`, `stable`), shown everywhere; its "
        "state stays with the name when the policy is edited. Default: the policy's text.",
    )
    targets: list[Target] = Field(min_length=1, description="Where it runs.")
    approval: bool = Field(
        default=False,
        description="A person approves each digest (or version) of this image before any wave starts "
        "(per wave: `rollout.waves[].approval`; docs/approvals.md).",
    )
    signatures: SignaturesField = Field(
        default=None,
        description="The signature gate of this image's targets (docs/trust.md): `off`, `warn`, "
        "`require`, or its fields. Set here, it applies whatever the wave's "
        "(`rollout.waves[].signatures`) says.",
    )

    @model_validator(mode="before")
    @classmethod
    def _key(cls, data: Any) -> Any:
        """``image`` becomes the key everything is kept under: the canonical tag, or the channel's
        ``registry/repository@<channel or policy>`` (tagpin.domain.channels)."""
        if not isinstance(data, dict) or not isinstance(data.get("image"), str):
            return data
        data = dict(data)
        image, channel = data["image"], data.get("channel")
        policy = _policy(data.get("policy"))
        if is_channel(image):  # a key already (a discovered target's index entry, a copy)
            key = ChannelKey.parse(image)
            assert key is not None
            if policy is None:
                if key.named:  # a configured channel's name: its policy is in the configuration
                    raise ValueError(f"{image!r}: channel {key.name!r} is not in the configuration")
                policy = _policy(key.name)
            if isinstance(policy, VersionPolicy) and not policy.chooses:
                raise ValueError(f"{image!r}: a channel needs a version policy, not {policy.kind}")
            return data | {"policy": policy}
        if policy is None or (isinstance(policy, VersionPolicy) and not policy.chooses):
            if channel is not None:
                raise ValueError("channel: names a version channel; give it a version policy")
            return data | {"policy": None}  # a followed tag: checked by _tagged_reference
        if not isinstance(policy, VersionPolicy):
            policy = VersionPolicy.model_validate(policy)
        if channel in set(PolicyKind):
            raise ValueError(f"channel: {channel!r} is a policy kind; choose another name")
        if ":" in image.rsplit("/", 1)[-1]:
            raise ValueError(
                f"image: {image!r}: a version policy chooses the tag; give the repository without a tag"
            )
        try:
            ref = ImageRef.parse(image)
        except InvalidReference as exc:
            raise ValueError(str(exc)) from None
        repository = ImageRef(ref.registry, ref.repository, None, None)
        name = channel if isinstance(channel, str) else policy.text
        return data | {"policy": policy, "image": str(ChannelKey(repository, name))}

    @field_validator("image")
    @classmethod
    def _tagged_reference(cls, value: FollowedKey) -> FollowedKey:
        return value if is_channel(value) else FollowedKey(_tagged(value))

    @property
    def channel_key(self) -> ChannelKey | None:
        """The channel this is, or None for a followed tag."""
        return ChannelKey.parse(self.image)

    @property
    def ref(self) -> ImageRef:
        """The followed tag. A channel has none of its own: its head is chosen at every check
        (``tagpin.usecases.channels``) and ``channel_key.at(head)`` is what is resolved."""
        if is_channel(self.image):
            raise ValueError(f"{self.image} is a version channel: its tag is chosen, not fixed")
        return ImageRef.parse(self.image)


def _tagged(value: str) -> str:
    try:
        ref = ImageRef.parse(value)
    except InvalidReference as exc:
        raise ValueError(str(exc)) from None
    if ref.digest is not None:
        raise ValueError(f"{value!r} is pinned to a digest; follow a tag (e.g. 'repo:stable')")
    return ref.tagged
