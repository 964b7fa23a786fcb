"""docs/configuration.md is generated from the configuration models and must be current."""

from __future__ import annotations

from tagpin_local import docgen


def test_configuration_reference_is_current():
    assert docgen.OUT.read_text() == docgen.render(), "docs/configuration.md is out of date: run `make docs`"


def test_every_field_is_described():
    undescribed = [
        line for line in docgen.render().splitlines() if line.startswith("| `") and line.endswith("|  |")
    ]
    assert undescribed == [], f"fields without a description in tagpin/config.py: {undescribed}"
