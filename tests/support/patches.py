"""The PATCHes of a workload the API server applied, as a cluster's front recorded them
(tools/tagpin_local/kube/front.py): the one count for "patched once", "N patches".

A PATCH the real API server refuses with 409 Conflict changed nothing: the object changed since
the client read it (the controller-manager writes a Deployment's status, Argo's controller a
Rollout's), and tagpin reads it again and sends its PATCH again (usecases/patch.py), as it should.
``front.count("PATCH", ...)`` counts that refused attempt too: CI run N of stop 42 saw one
Deployment "patched twice" so. Count attempts only where the meaning is "no PATCH was even sent"
(a dry run, a stale read refused before sending).
"""

from __future__ import annotations

import re
from typing import Protocol

from tagpin_local.kube.front import RequestRecord


class Recorder(Protocol):
    """A front, or a local cluster (its front's log)."""

    @property
    def requests(self) -> list[RequestRecord]: ...


def applied_patches(kube: Recorder, path_regex: str = "") -> int:
    """How many PATCHes whose path matches ``path_regex`` (searched, as ``count``'s) the API server
    applied (answered < 300; a refusal, a fault's answer, a dropped connection are not). One still in
    flight has no answer yet and is not counted: wait for what the client does after its answer
    (its invocation's end, its queue emptied) before counting."""
    pattern = re.compile(path_regex)
    seen = list(kube.requests)  # a copy: the front appends from its own thread
    return sum(1 for r in seen if r.method == "PATCH" and pattern.search(r.path) and (r.status or 500) < 300)
