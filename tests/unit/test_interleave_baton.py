"""The test support's ``Baton`` (tests/support/interleave.py) says at once when an actor makes two
port calls at the same time, instead of leaving one of them parked until its timeout."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from hypothesis import settings

from tests.support.interleave import Baton, interleaving_settings
from tests.support.waiting import wait_for


class Port:
    def read(self, key: str) -> str:
        return key


def test_an_actor_making_two_port_calls_at_once_is_told_so() -> None:
    """The test lets nothing go once the first call is parked, so the second is made while it is:
    both are told (before, the test stepped the actor on at once, and a second call whose thread
    started after the first was let go was no longer at once: CI run V2 failed so)."""
    baton = Baton()
    port = baton.wrap(Port(), "a")

    def both_at_once() -> list[str]:
        with ThreadPoolExecutor(2) as pool:
            calls = [pool.submit(port.read, key) for key in ("x", "y")]
            return [call.result() for call in calls]

    baton.start("a", both_at_once)
    baton.step("a")  # until the first call parks
    failed = wait_for("the actor told", lambda: baton.done.get("a"), deadline_s=30)
    assert isinstance(failed, AssertionError) and "one at a time" in str(failed), failed
    assert baton.parked_at("a") is None and baton.log == [("a", "start")]  # neither call was made


def test_an_actor_calling_one_at_a_time_runs_to_its_end() -> None:
    baton = Baton()
    port = baton.wrap(Port(), "a")
    baton.start("a", lambda: [port.read("x"), port.read("y")])
    assert baton.finish("a") == ["x", "y"]
    assert baton.log == [("a", "start"), ("a", "Port.read"), ("a", "Port.read")]


def test_under_ci_the_interleavings_are_the_same_every_run() -> None:
    """``.ci/run`` sets ``CI=true``, and hypothesis then loads its ``ci`` profile: the settings the
    interleavings run with keep its ``derandomize`` (CI replays one fixed set; a failure there is
    reproducible), and keep drawing new ones elsewhere; ``TAGPIN_INTERLEAVINGS`` changes only how many."""
    current = settings.default
    try:
        settings.load_profile("ci")
        assert interleaving_settings(examples=40, steps=25).derandomize
        assert interleaving_settings(examples=40, steps=25).max_examples == int(
            os.environ.get("TAGPIN_INTERLEAVINGS", "40")
        )
        settings.load_profile("default")
        assert not interleaving_settings(examples=40, steps=25).derandomize
    finally:
        settings.register_profile("_restored", current)
        settings.load_profile("_restored")
