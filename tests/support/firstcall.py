"""A function's container started as the local runtime starts one, in a process of its own as on
Lambda (``tagpin_local.firstcall``, which ``bench/coldstart`` uses too): its handler loaded, then
``tagpin.warming`` (Lambda's init phase, provisioned concurrency); then its invocations, one after
the other (each event made just before its invocation: a push between two). For each: the modules
it imported (what warming left to it), the pydantic validators and the AWS operations it set up,
its CPU and wall time, and its answer."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from tagpin_local.firstcall import Call, run_container

from tests.support.constants import ROOT

__all__ = ["Call", "invoke_started_container"]


def invoke_started_container(
    function: str, events: Iterable[Callable[[], dict[str, Any]]], *, warm: bool = True
) -> list[Call]:
    """Start ``function``'s container in a fresh process (warmed unless ``warm`` is False) with this
    process's environment (a local stack's, which sets it), and invoke it with each event, each
    made (called) once the invocation before it has returned."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "layers" / "common")}
    app = ROOT / "functions" / function / "app.py"
    return run_container(function, app, events, python=sys.executable, env=env, warm=warm).calls
