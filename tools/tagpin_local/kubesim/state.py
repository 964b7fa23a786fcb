"""What the simulator holds. Everything is held in memory; one lock guards the state.

The simulator is one object made of mixins over this state, one per concern:
:class:`~.controllers.Controllers` (rollouts, Pods), :class:`~.store.Store` (the objects),
:class:`~.discovery.Discovery` (discovery, kubectl's tables), :class:`~.api.Api` (the REST semantics
of a request) and :class:`~.server.KubeSim` (the HTTP server, faults, the request log).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .resources import Obj

if TYPE_CHECKING:
    from .server import _Server

Key = tuple[str, str, str]  # (kind, namespace, name); namespace "" for cluster-scoped kinds
# ``Store.list`` shadows the builtin inside its class body, hence these aliases.
ObjList = list[Obj]
KeyList = list[Key]
StrList = list[str]


class State:
    """The state every layer reads and writes; ``_lock`` (re-entrant) guards all of it.

    The knobs of the simulated controllers are plain attributes (see :class:`~.server.KubeSim`).
    """

    def __init__(self, rollout_delay: float = 0.0) -> None:
        self.rollout_delay = rollout_delay
        self.fail_rollouts = False
        self.broken: set[str] = set()
        self.nodes = 1
        self.image_id_for: Callable[[str], str | None] | None = None
        self._lock = threading.RLock()
        self._objects: dict[Key, Obj] = {}
        self._owned: dict[Key, list[Key]] = {}
        self._timers: dict[Key, threading.Timer] = {}
        self._stopping = threading.Event()
        self._rv = 0
        self._seq = 0
        self._server: _Server | None = None

    # -- internals (call with the lock held)
    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)
