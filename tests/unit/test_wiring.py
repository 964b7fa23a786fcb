"""The composition root: every cached factory is made through ``cached`` (recorded), and
``wiring.reset`` clears each one; a hand-kept list once missed ``signature_checker`` and
``trust_material``, whose keys and clients then outlived a reset."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Any

import pytest
from tagpin import wiring


def cached_in_modules() -> dict[str, functools._lru_cache_wrapper[Any]]:
    """Every ``functools.cache`` wrapper a module of the composition root defines, by name."""
    found: dict[str, functools._lru_cache_wrapper[Any]] = {}
    # the package's modules, and the write-back's composition root above it (tagpin.gitwiring),
    # imported here so the answer does not depend on whether an earlier test imported it
    names = [f"tagpin.wiring.{info.name}" for info in pkgutil.iter_modules(wiring.__path__)]
    for full in [*names, "tagpin.gitwiring"]:
        module = importlib.import_module(full)
        short = full.removeprefix("tagpin.wiring.").removeprefix("tagpin.")
        for name, value in vars(module).items():
            if isinstance(value, functools._lru_cache_wrapper) and value.__module__ == module.__name__:
                found[f"{short}.{name}"] = value
    return found


def test_every_cached_factory_is_recorded_for_reset() -> None:
    found = cached_in_modules()
    assert {"rollout.signature_checker", "rollout.trust_material", "core.state", "people.console_app"} <= set(
        found
    )
    assert set(map(id, found.values())) == set(map(id, wiring.factories()))  # none cached aside


def test_reset_clears_every_cached_factory(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAGPIN_STATE_TABLE", "tagpin-state")
    wiring.reset()
    built = {
        "settings": wiring.settings(),
        "aws": wiring.aws("sqs"),
        "secrets": wiring.secrets(),
        "state": wiring.state(),
        "registry_client": wiring.registry_client(),
        "signature_checker": wiring.signature_checker(),
        "trust_material": wiring.trust_material(),
        "console_admission": wiring.console_admission(),
    }
    filled = {f.__name__ for f in wiring.factories() if f.cache_info().currsize}
    assert set(built) <= filled
    wiring.reset()
    assert [f.__name__ for f in wiring.factories() if f.cache_info().currsize] == []
    assert wiring.trust_material() is not built["trust_material"]  # built anew after a reset
    assert wiring.signature_checker() is not built["signature_checker"]
    wiring.reset()


def test_a_containers_clients_share_one_session_until_a_reset(aws: None) -> None:
    """One boto3 session per container: the DynamoDB and SQS clients read one loader's service
    models and endpoints (a session per client read them again: ``make bench-coldstart``'s first
    invocation); a reset (a new container, in effect) starts a new session."""
    wiring.reset()
    dynamodb, sqs = wiring.aws("dynamodb"), wiring.aws("sqs")
    assert dynamodb._loader is sqs._loader is wiring.aws_session()._session.get_component("data_loader")
    wiring.reset()
    assert wiring.aws("sqs")._loader is not sqs._loader
    wiring.reset()
