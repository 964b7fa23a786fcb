"""The ``Workloads`` port (consumer, verifier) and the ``Inventory`` port (reconciler) over the
official client: read, change and list workloads and pods, and turn the API's answers into the
ports' errors (``Unreachable``, ``Conflict``, ``NotFound``, ``Forbidden``).

Every kind goes the same way, by its profile (``tagpin.domain.kinds``): its group, version and
plural address it (``CustomObjectsApi`` builds the same URLs for built-in kinds as for custom
ones), its pod template is read at the profile's path, and an image change is sent as the
profile's patch type: a strategic merge patch, or a JSON patch for custom resources
(``tagpin.adapters.kubernetes.jsonpatch`` says why).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from tagpin.adapters.kubernetes import jsonpatch
from tagpin.adapters.kubernetes.pages import NOTE, UNREADABLE, load_page
from tagpin.domain.kinds import ImageChange, Kind, PatchType, profile_of
from tagpin.domain.kinds.profile import dig
from tagpin.domain.platforms import Platform
from tagpin.ports.workloads import (
    Conflict,
    Forbidden,
    NotFound,
    Pod,
    Unreachable,
    Unreadable,
    Workload,
    WorkloadError,
)

logger = logging.getLogger(__name__)

# Every cluster call ends within connect + read timeout, and is tried once by the client (no hidden
# urllib3 retries): the consumer's and the verifier's time budgets (RESERVE_MS) rely on it.
REQUEST_TIMEOUT = (3.0, 10.0)  # connect, read
DOWN_FOR_S = 30.0  # a cluster that timed out is skipped this long (per warm container)
# A transient answer is tried again here, within the invocation: a blip costs a second, not a
# redelivery. Refusals (400, 401, 403, 404, 422) are not transient; 409 is the caller's (re-read).
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
ATTEMPTS = 4
BACKOFF_BASE_S, BACKOFF_CAP_S = 0.25, 2.0  # full jitter: random(0, min(cap, base * 2**attempt))
RETRY_AFTER_MAX_S = 5.0  # a longer Retry-After is not waited for here: the queue backs off instead
RETRY_SLEEP_MAX_S = 6.0  # all the waiting one call may do
PAGE_SIZE = 500  # items per LIST page (the API server's own default chunk size)


def workload_from(kind: Kind, data: dict[str, Any]) -> Workload:
    """A workload (as the API serves it, JSON) in the form tagpin reads, by its kind's profile."""
    profile = profile_of(kind)
    template = dig(data, profile.template)
    pod = dig(template, ("spec",))
    spec = dig(data, ("spec",))
    meta = dig(data, ("metadata",))
    return Workload(
        resource_version=str(meta.get("resourceVersion", "")),
        containers={c["name"]: c.get("image", "") for c in pod.get("containers") or []},
        init_containers={c["name"]: c.get("image", "") for c in pod.get("initContainers") or []},
        template_annotations=dict(dig(template, ("metadata", "annotations"))),
        kind=kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        selector=profile.selector(data) if profile.selector is not None else None,
        rollout=profile.rollout_health(int(meta.get("generation") or 0), spec, dig(data, ("status",))),
        own_rollback=profile.own_rollback(spec),
    )


def unreadable_from(kind: Kind, data: dict[str, Any]) -> Workload:
    """A listed workload whose JSON could not be read (``tagpin.adapters.kubernetes.pages``)."""
    meta = dig(data, ("metadata",))
    return Workload(
        resource_version="",
        containers={},
        kind=kind,
        namespace=str(meta.get("namespace", ""))[:253],
        name=str(meta.get("name", ""))[:253],
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        unreadable=str(data[UNREADABLE]),
    )


def pod_from(data: dict[str, Any]) -> Pod:
    meta = data.get("metadata") or {}
    status = data.get("status") or {}
    statuses = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    return Pod(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        image_ids={str(c.get("name")): str(c.get("imageID") or "") for c in statuses},
    )


class KubeWorkloads:
    """The ``Workloads`` port (rollout) and the ``Inventory`` port (reconcile) over the official
    client. Answers are read raw (``_preload_content=False``), never by the client's parser: GETs
    and LISTs as JSON (a page of 500 workloads is not worth building 500 generated models for, and
    an object nested too deep is ``Unreadable``), a PATCH's not at all (``_discard``)."""

    def __init__(
        self,
        api: ApiClient,
        page_size: int = PAGE_SIZE,
        breaker: ClusterBreaker | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self._api = api
        self._page_size = page_size
        self._breaker = breaker or ClusterBreaker("cluster")
        self._sleep = sleep
        self._rng = rng
        self.rejected = False  # the cluster answered 401: rebuild the client before the next use
        self._core, self._custom = CoreV1Api(api), CustomObjectsApi(api)

    def prepare(self) -> None:
        """Build, ahead of a first call (``tagpin.warming``), what the client builds at it: the
        client checks each API method's arguments with pydantic (``validate_call``) and builds a
        method's validator at its first call (3-6 ms of CPU each). Each method this class calls is
        called here with an argument every method refuses (``_host_index`` must be 0): the
        validator is built, nothing is sent."""
        from pydantic import ValidationError

        methods: tuple[Callable[..., Any], ...] = (
            self._custom.get_namespaced_custom_object,
            self._custom.patch_namespaced_custom_object,
            self._custom.list_cluster_custom_object,
            self._core.list_namespaced_pod,
            self._core.list_node,
        )
        for method in methods:
            with contextlib.suppress(ValidationError):
                method(_host_index=-1)

    @property
    def api(self) -> ApiClient:
        """The cluster's API client, with the credentials the functions use (``tagpin doctor``)."""
        return self._api

    def get(self, namespace: str, kind: Kind, name: str) -> Workload:
        return workload_from(kind, self._read_json(namespace, kind, name))

    def _read_json(self, namespace: str, kind: Kind, name: str) -> dict[str, Any]:
        p = profile_of(kind)
        what = f"get {p.resource} in namespace {namespace}"
        read = self._custom.get_namespaced_custom_object
        response = self._call(
            what, read, p.group, p.version, namespace, p.plural, name, _preload_content=False
        )
        try:
            data = json.loads(response.data)
        except RecursionError:
            raise Unreadable(f"{kind.value} {namespace}/{name}: {NOTE}") from None
        return data if isinstance(data, dict) else {}

    def set_image(self, namespace: str, kind: Kind, name: str, change: ImageChange) -> None:
        p = profile_of(kind)
        body = p.patch_body(change)
        payload: dict[str, Any] | list[jsonpatch.Operation] = body
        if p.patch is PatchType.JSON:
            # A JSON patch addresses the container by its index in the object as it is now.
            current = self._read_json(namespace, kind, name)
            found = (current.get("metadata") or {}).get("resourceVersion")
            if change.resource_version and change.resource_version != found:
                # the server would answer 409: not worth asking
                raise Conflict(
                    f"the object has been modified (resourceVersion {found}, read {change.resource_version})"
                )
            payload = jsonpatch.json_patch(body, current)
        answer = self._call(
            f"patch {p.resource} in namespace {namespace}",
            self._custom.patch_namespaced_custom_object,
            p.group,
            p.version,
            namespace,
            p.plural,
            name,
            payload,
            field_manager="tagpin",
            _content_type=p.patch.value,
            _preload_content=False,
        )
        _discard(answer)

    def workloads(self, kind: Kind, selector: str) -> Iterator[Workload]:
        """Every workload of ``kind`` in every namespace matching the label ``selector``, paged."""
        p = profile_of(kind)
        what = f"list {p.resource} in all namespaces"
        listing = self._custom.list_cluster_custom_object
        for item in self._pages(what, listing, p.group, p.version, p.plural, label_selector=selector):
            yield unreadable_from(kind, item) if UNREADABLE in item else workload_from(kind, item)

    def pods(self, namespace: str) -> Iterator[Pod]:
        what = f"list pods in namespace {namespace}"
        for item in self._pages(what, self._core.list_namespaced_pod, namespace):
            if UNREADABLE not in item:  # a pod's fields are typed: never nested that deep
                yield pod_from(item)

    def platforms(self) -> frozenset[Platform] | None:
        """What the nodes run (``status.nodeInfo``); None when the role may not list nodes (the
        configured platforms decide then: docs/trust.md)."""
        found: set[Platform] = set()
        try:
            for item in self._pages("list nodes", self._core.list_node):
                info = (item.get("status") or {}).get("nodeInfo") or {}
                try:
                    found.add(
                        Platform.parse(f"{info.get('operatingSystem', '')}/{info.get('architecture', '')}")
                    )
                except ValueError:
                    continue
        except Forbidden:
            return None
        return frozenset(found)

    def _pages(
        self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Iterator[dict[str, Any]]:
        """Every item of a paged LIST. An expired continue token (410) restarts the list once, so
        items of the first pages may come twice: callers key them by namespace and name."""
        token: str | None = None
        restarted = False
        while True:
            try:
                response = self._call(
                    what, fn, *args, limit=self._page_size, _continue=token, _preload_content=False, **kwargs
                )
            except _Expired:
                # The continue token outlived the snapshot (410): list again from the start, once.
                if restarted or token is None:
                    raise Unreachable(f"{what}: the list snapshot expired twice") from None
                restarted, token = True, None
                continue
            page = load_page(response.data)
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                return

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One API call, tried again on a transient answer (429 with its Retry-After, 5xx, a refused
        or reset connection) with jittered exponential backoff, at most ``ATTEMPTS`` times and
        ``RETRY_SLEEP_MAX_S`` of waiting. A timeout is not tried again (the cluster hangs: its
        breaker opens). A PATCH carries its resourceVersion, so a retried one that had in fact been
        applied answers 409, and the caller re-reads and finds the image already current."""
        slept = 0.0
        for attempt in range(ATTEMPTS):
            self._breaker.check()
            last = attempt + 1 == ATTEMPTS
            try:
                answer = fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
            except ApiException as exc:
                if exc.status == 401:
                    self.rejected = True
                wait = self._wait(attempt, exc) if exc.status in RETRY_STATUSES and not last else None
                if wait is None or slept + wait > RETRY_SLEEP_MAX_S:
                    raise _translate(exc, what) from None
                logger.info(
                    "transient answer; trying again",
                    extra={"what": what, "status": exc.status, "wait_s": wait},
                )
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if _timed_out(exc):  # a hung cluster: do not wait for it again soon
                    self._breaker.failure()
                    raise Unreachable(f"cluster unreachable: {type(exc).__name__}: {exc}") from None
                wait = None if last else self._wait(attempt, None)
                if wait is None or slept + wait > RETRY_SLEEP_MAX_S:
                    raise Unreachable(f"cluster unreachable: {type(exc).__name__}: {exc}") from None
                logger.info("connection failed; trying again", extra={"what": what, "wait_s": wait})
            else:
                self._breaker.success()
                return answer
            self._sleep(wait)
            slept += wait
        raise AssertionError("unreachable: the last attempt raises or returns")

    def _wait(self, attempt: int, exc: ApiException | None) -> float | None:
        """Seconds before the next attempt; None when a Retry-After asks for longer than is waited here."""
        backoff = self._rng(0.0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))
        after = _retry_after(exc.headers if exc is not None else None)
        if after is None:
            return backoff
        return None if after > RETRY_AFTER_MAX_S else max(after, backoff)


def _discard(answer: urllib3.BaseHTTPResponse) -> None:
    """A 2xx answer not needed (a PATCH's: the whole object) read to its end unparsed, and its
    connection given back to the pool. The client's parser would read it a few frames deeper than
    ``_read_json`` does: an object the GET reads could be a ``RecursionError`` here, after the server
    applied the patch. A body that breaks off closes its connection; the patch has landed anyway."""
    try:
        answer.drain_conn()
    finally:
        answer.release_conn()


def _retry_after(headers: Any) -> float | None:
    """Retry-After in seconds (the API server sends delta-seconds), if any."""
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _timed_out(exc: BaseException) -> bool:
    """A connect or read timeout, possibly wrapped in urllib3's MaxRetryError."""
    reason = getattr(exc, "reason", None)
    return isinstance(exc, urllib3.exceptions.TimeoutError | TimeoutError) or (
        reason is not None and isinstance(reason, urllib3.exceptions.TimeoutError | TimeoutError)
    )


class ClusterBreaker:
    """A cluster that timed out (it accepts connections and does not answer, or no packet comes
    back) is skipped for ``DOWN_FOR_S``: the other targets of the batch in that cluster fail at once
    instead of each waiting for the timeout, and the other clusters' targets get the invocation's
    time. A refused or reset connection costs nothing to try again: it does not open the breaker."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name
        self._clock = clock
        self._until = 0.0

    def check(self) -> None:
        left = self._until - self._clock()
        if left > 0:
            raise Unreachable(f"cluster {self._name} did not answer; not asked again for {left:.0f} s")

    def failure(self) -> None:
        self._until = self._clock() + DOWN_FOR_S

    def success(self) -> None:
        self._until = 0.0


class _Expired(Unreachable):
    """410 Gone on a continued LIST."""


def _translate(exc: ApiException, what: str) -> WorkloadError:
    status = exc.status or 0
    reason = exc.reason or ""
    if status == 409:
        return Conflict(reason or "conflict")
    if status == 404:
        return NotFound("workload not found")
    if status == 410:
        return _Expired("continue token expired")
    if status == 403:
        verb, resource = what.split(" ", 2)[:2]
        return Forbidden(
            f"forbidden: {what}. tagpin needs the verb {verb!r} on {resource} "
            "(get, list and patch on the workload kinds, list on pods; see docs/rbac.yaml)"
        )
    if status == 401:
        return Unreachable("the cluster rejected tagpin's credentials (401)")
    return Unreachable(f"API server answered {status} {reason}".strip())
