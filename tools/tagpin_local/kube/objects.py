"""Objects by kind, as the simulator's tests handle them (``create``, ``get``, ``list``, ``patch``,
``delete``), over the official client's dynamic client (discovery finds the group and plural).

Plain dicts in and out. Every call goes through the API server:
admission, defaults, validation and the real patch semantics apply.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kubernetes import client, dynamic, watch

type Obj = dict[str, Any]
type ObjList = list[Obj]


class Objects:
    """The admin's view of one cluster's objects."""

    def __init__(self, api: client.ApiClient) -> None:
        self._dynamic = dynamic.DynamicClient(api)  # type: ignore[no-untyped-call]

    def _resource(self, kind: str, api_version: str | None) -> Any:
        if api_version is not None:
            return self._dynamic.resources.get(api_version=api_version, kind=kind)
        return self._dynamic.resources.get(kind=kind, preferred=True)

    def create(self, obj: Obj) -> Obj:
        resource = self._resource(obj["kind"], obj.get("apiVersion"))
        namespace = obj.get("metadata", {}).get("namespace") if resource.namespaced else None
        created: Obj = resource.create(body=obj, namespace=namespace).to_dict()
        return created

    def get(self, kind: str, namespace: str | None, name: str, api_version: str | None = None) -> Obj:
        got: Obj = self._resource(kind, api_version).get(name=name, namespace=namespace).to_dict()
        return got

    def list(self, kind: str, namespace: str | None = None, api_version: str | None = None) -> ObjList:
        items = self._resource(kind, api_version).get(namespace=namespace).to_dict()["items"]
        return [dict(item) for item in items]

    def patch(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        patch: Obj | ObjList,
        content_type: str | None = None,
        api_version: str | None = None,
    ) -> Obj:
        """A strategic merge patch by default (a JSON merge patch for a custom resource, which the API
        server refuses strategic merge for)."""
        resource = self._resource(kind, api_version)
        if content_type is None:
            custom = resource.group not in ("", "apps", "batch") and not resource.group.endswith(".k8s.io")
            content_type = f"application/{'merge' if custom else 'strategic-merge'}-patch+json"
        done: Obj = resource.patch(
            body=patch, name=name, namespace=namespace, content_type=content_type
        ).to_dict()
        return done

    def watch(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        since: str,
        timeout: int = 10,
        api_version: str | None = None,
    ) -> Iterator[Obj]:
        """Each state of one object the API server stored after resourceVersion ``since``, in order
        (a WATCH delivers every write, however soon the next one follows), for ``timeout`` seconds
        at most. A deletion ends it; a ``since`` older than the server keeps is an ApiException
        (410)."""
        watcher = watch.Watch()  # type: ignore[no-untyped-call]
        events = self._dynamic.watch(  # type: ignore[no-untyped-call]
            self._resource(kind, api_version),
            namespace=namespace,
            name=name,
            resource_version=since,
            timeout=timeout,
            watcher=watcher,
        )
        try:
            for event in events:
                if event["type"] == "DELETED":
                    return
                yield dict(event["raw_object"])
        finally:
            watcher.stop()  # type: ignore[no-untyped-call]

    def delete(self, kind: str, namespace: str | None, name: str, api_version: str | None = None) -> None:
        self._resource(kind, api_version).delete(name=name, namespace=namespace)
