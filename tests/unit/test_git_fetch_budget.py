"""The Git fetch's budget (``FETCH_BUDGET``, tagpin.adapters.git.repositories) stays sized from the
write-back function's memory (template.yaml): dulwich holds a fetched pack whole and then its objects
inflated, several times the pack's size, next to the runtime's own 100 MB or so, so a fetch may
receive at most an eighth of the function's memory. Lowering the function's MemorySize without the
budget (or raising the budget past it) fails here, not as a function killed for its memory."""

from __future__ import annotations

from tagpin.adapters.git.repositories import FETCH_BUDGET

from tests.unit.template_support import function_props, load_template

MB = 1024 * 1024


def test_the_fetch_budget_is_an_eighth_of_the_write_back_functions_memory_at_most() -> None:
    memory = function_props(load_template(), "WriteBackFunction")["MemorySize"]
    assert memory * MB >= FETCH_BUDGET * 8, (FETCH_BUDGET, memory)
