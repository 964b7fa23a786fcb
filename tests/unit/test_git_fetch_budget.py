"""The Git fetch's budget (``FETCH_BUDGET``, tagpin.adapters.git.repositories) stays sized from the
write-back function's memory (template.yaml): dulwich holds a fetched pack whole and then its objects
inflated, about ten times the pack's size for a repository of YAML (the measurement is in the
budget's comment), next to the runtime's own 90 MB or so, so a fetch may receive at most a
sixteenth of the function's memory. Lowering the function's MemorySize without the budget (or
raising the budget past it) fails here, not as a function killed for its memory."""

from __future__ import annotations

from tagpin.adapters.git.packs import PER_OBJECT
from tagpin.adapters.git.repositories import FETCH_BUDGET, INFLATED_BUDGET

from tests.unit.template_support import function_props, load_template

MB = 1024 * 1024


def test_the_fetch_budget_is_a_sixteenth_of_the_write_back_functions_memory_at_most() -> None:
    memory = function_props(load_template(), "WriteBackFunction")["MemorySize"]
    assert memory * MB >= FETCH_BUDGET * 16, (FETCH_BUDGET, memory)


def test_what_a_fetch_may_inflate_to_fits_the_write_back_functions_memory() -> None:
    """``INFLATED_BUDGET`` (what a pack's objects declare, ``PER_OBJECT`` each more): held at the
    measured 2.2 times (one large blob; a repository of many manifests 1.4 times) next to the
    runtime's 90 MB, under the memory; and the measured repository of 32,000 manifests, each in a
    directory of its own (36 MiB of YAML, 64,606 objects), stays within it."""
    memory = function_props(load_template(), "WriteBackFunction")["MemorySize"]
    assert memory * MB >= INFLATED_BUDGET * 2.2 + 90 * MB, (INFLATED_BUDGET, memory)
    assert INFLATED_BUDGET >= 36 * MB + 64_606 * PER_OBJECT, INFLATED_BUDGET
