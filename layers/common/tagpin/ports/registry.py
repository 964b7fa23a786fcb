"""The registry side of tagpin, as the use cases see it: resolve a tag to the digest it points to
now, fetch a manifest, list a repository's tags, read a blob and the referrers of a manifest
(signatures), and the errors and answers that cross that boundary.

``tagpin.adapters.registry`` implements it over the Registry HTTP API v2 (OCI distribution).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Literal, Protocol

from tagpin.domain.refs import Digest, ImageRef

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_TYPES = (OCI_INDEX, DOCKER_MANIFEST_LIST, OCI_MANIFEST, DOCKER_MANIFEST_V2)
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_MANIFEST_LIST})
OCI_EMPTY = "application/vnd.oci.empty.v1+json"  # the config of an artifact manifest: ``{}``
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class RegistryAccess:
    insecure: bool = False  # plain http://
    credentials: Credentials | None = None
    head_only: bool = False  # never GET a manifest (Docker Hub: a GET counts against the pull limit)
    max_concurrency: int | None = None  # requests in flight to this registry (None: the client default)
    # Called when the registry rejects the credentials: a provider drops its cached token.
    invalidate: Callable[[], None] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Resolution:
    ref: ImageRef  # what was resolved (the tag, or the digest when the ref has no tag)
    digest: Digest
    media_type: str
    method: str  # "HEAD" | "GET"
    rate_limit: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def pinned(self) -> ImageRef:
        """``registry/repo:tag@digest``."""
        return self.ref.with_digest(self.digest)

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES


# Why a tag listing stopped: "complete" (the registry said it had no more) or one of the reasons it
# stopped early: a bound of the client (tags, pages), a registry that served pages it had served
# already ("loop"), or a next-page link the client will not follow ("refused-link": another host,
# scheme or repository, where the registry's token must not go).
type TagListingEnd = Literal["complete", "max-tags", "max-pages", "loop", "refused-link"]


@dataclass(frozen=True)
class TagListing:
    """The tags of one repository, as far as a bounded listing got (``TagLister.list_tags``).

    ``tags`` are valid tags only (``[A-Za-z0-9_][A-Za-z0-9._-]{0,127}``), each once, in the order the
    registry served them (lexical for registries that paginate, any order for those that do not);
    anything else the registry sent is left out and counted in ``dropped``.
    """

    repository: ImageRef  # registry/repository, without tag or digest
    tags: tuple[str, ...]
    pages: int  # tag-list pages received
    requests: int  # HTTP requests the listing made: pages, retries, auth challenges and token fetches
    end: TagListingEnd = "complete"
    dropped: int = 0  # entries that were not valid tags (bad characters, longer than 128, not a string)
    rate_limit: dict[str, str] = field(default_factory=dict, hash=False)  # the last rate-limit headers

    @property
    def truncated(self) -> bool:
        """The registry may hold tags that are not in ``tags``: the listing stopped before the end."""
        return self.end != "complete"


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor as a registry served it (a layer, or an entry of an index such as
    a referrers list). Untrusted: ``digest`` is well formed (``is_digest``) and ``size`` not
    negative, nothing more; whoever reads the content checks it against ``digest``."""

    media_type: str
    digest: str
    size: int
    artifact_type: str = ""
    annotations: dict[str, str] = field(default_factory=dict, hash=False)


class RegistryError(Exception):
    """A registry answered badly or not at all. Messages never carry credentials or tokens."""

    def __init__(
        self, message: str, *, host: str, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.host = host
        self.status = status
        self.retry_after = retry_after  # seconds the registry asked to wait (429 Retry-After)

    @property
    def transient(self) -> bool:
        """Worth retrying: no answer, a timeout, 429 or a 5xx."""
        return self.status is None or self.status in RETRY_STATUSES


class ManifestNotFound(RegistryError):
    pass


class GetsDisabled(RegistryError):
    """The registry is HEAD-only (``head_only``: a GET counts against its pull limit): a manifest
    is not fetched; what needs its body (the platform check) is skipped there."""

    @property
    def transient(self) -> bool:
        return False


class BlobNotFound(RegistryError):
    """The registry does not hold the blob (404)."""


class ContentMismatch(RegistryError):
    """What the registry served does not hash to the digest it was asked for: corrupt or tampered."""


class ContentTooLarge(RegistryError):
    """A blob or document is over the size the caller accepts; it was not read to the end."""


class RepositoryNotFound(RegistryError):
    """The registry does not know the repository (404 on its tag list)."""


class AuthError(RegistryError):
    pass


class RegistryUnavailable(RegistryError):
    """The registry's circuit is open: it kept failing, so it is skipped for now."""


class Resolver(Protocol):
    def resolve(self, ref: ImageRef) -> Resolution: ...


class ManifestFetcher(Protocol):
    def fetch_manifest(self, ref: ImageRef) -> tuple[str, bytes]: ...


class BatchResolver(ManifestFetcher, Protocol):
    """Resolve many tags at once, bounded and time-limited (the poller)."""

    def start_many(
        self, refs: Iterable[ImageRef], *, deadline: float | None = None
    ) -> Future[dict[ImageRef, Resolution | RegistryError]]: ...


class TagLister(Protocol):
    """List the tags of a repository (``repository``'s tag and digest are ignored): for following
    the newest version a policy allows. A push notification names its tag, so this is for polls;
    implementations bound the listing and say when it was cut short (``TagListing.truncated``)."""

    def list_tags(self, repository: ImageRef) -> TagListing: ...


class BlobFetcher(Protocol):
    """Read a blob (``GET /v2/<name>/blobs/<digest>``) of ``ref``'s repository, checked against
    ``digest`` and refused (``ContentTooLarge``) past ``max_bytes``: signatures and bundles are
    small, and everything a registry serves is untrusted."""

    def fetch_blob(self, ref: ImageRef, digest: str, max_bytes: int) -> bytes: ...


class ReferrersLister(Protocol):
    """The manifests whose ``subject`` is ``digest`` in ``ref``'s repository (OCI 1.1 referrers:
    the referrers API, else the ``sha256-<hex>`` tag schema), only those of ``artifact_type`` when
    given. Bounded by the implementation; an empty list when there are none."""

    def referrers(
        self, ref: ImageRef, digest: str, *, artifact_type: str | None = None
    ) -> list[Descriptor]: ...


class ArtifactReader(BlobFetcher, ReferrersLister, Protocol):
    """What signature verification reads from a registry: manifests (bounded: ``max_bytes``, by tag
    or by digest, checked against the digest), blobs and referrers."""

    def fetch_manifest(self, ref: ImageRef, *, max_bytes: int | None = None) -> tuple[str, bytes]: ...
