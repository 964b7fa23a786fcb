"""What docs/deploying.md and docs/build.md say agrees with the files they describe: the RBAC
excerpt is docs/rbac.yaml's rules, and the build's caching is samconfig.toml's."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import yaml

from tests.support.constants import ROOT


def _rbac_rules() -> dict[str, list[dict[str, Any]]]:
    documents = yaml.safe_load_all((ROOT / "docs" / "rbac.yaml").read_text(encoding="utf-8"))
    return {d["metadata"]["name"]: d["rules"] for d in documents if d and d["kind"] == "ClusterRole"}


def test_the_rbac_excerpt_is_rbac_yaml() -> None:
    text = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    (excerpt,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "tagpin-consumer:" in b]
    assert yaml.safe_load(excerpt) == _rbac_rules()
    assert {"argoproj.io", ""} <= {g for r in _rbac_rules()["tagpin-consumer"] for g in r["apiGroups"]}


def test_build_md_says_what_samconfig_does_about_caching() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text(encoding="utf-8"))
    cached = config["default"]["build"]["parameters"]["cached"]
    text = (ROOT / "docs" / "build.md").read_text(encoding="utf-8")
    assert cached is False
    assert "Builds are not cached (`samconfig.toml`: `cached = false`)" in text
    assert "turns on cached" not in text and "cached + parallel" not in text


def test_the_outputs_table_lists_every_output_of_the_template() -> None:
    """The CLI and the doctor find the stack through its outputs, and people find its addresses
    there: each one the template declares is in docs/deploying.md's outputs table."""
    from tests.unit.template_support import load_template

    text = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    table = text[text.index("| output | what |") :].split("\n\n", 1)[0]
    documented = set(re.findall(r"`([A-Za-z]+)`", table))
    assert set(load_template()["Outputs"]) <= documented


def _parameter_rows() -> dict[str, tuple[str, str]]:
    """docs/deploying.md's parameters table: each parameter named in a row -> (its default, what
    the row allows). A row may name two parameters (`A`, `B` | `a`, `b` | ...)."""
    text = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    table = text[text.index("| parameter | default | allowed | what it does |") :].split("\n\n", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for line in table.splitlines()[2:]:
        names, default, allowed, _what = (cell.strip() for cell in line.strip("|").split("|", 3))
        found = re.findall(r"`([A-Za-z]+)`", names)
        defaults = [""] * len(found) if default == "empty" else re.findall(r"`([^`]*)`", default)
        assert len(defaults) == len(found), line
        rows |= {name: (value, allowed) for name, value in zip(found, defaults, strict=True)}
    return rows


def test_the_parameters_table_lists_every_parameter_with_its_default_and_bounds() -> None:
    """What `sam deploy --guided` asks: each parameter of the template, with the default the
    template gives it and the values it allows, as docs/deploying.md's table says."""
    from tests.unit.template_support import load_template

    parameters = load_template()["Parameters"]
    rows = _parameter_rows()
    assert set(rows) == set(parameters)
    for name, spec in parameters.items():
        default, allowed = rows[name]
        assert default == str(spec.get("Default", "")), name
        for value in spec.get("AllowedValues", []):
            assert str(value) in allowed, (name, value)
        if "MaxValue" in spec:  # "1 to 64"; "0, or 2 to 1000" where a Rule refuses 1
            assert allowed.startswith(str(spec["MinValue"])) and f" to {spec['MaxValue']}" in allowed, name


def test_the_readme_names_every_parameter() -> None:
    """The README's Deploy section names each parameter a new user may set (the table in
    docs/deploying.md gives the details)."""
    from tests.unit.template_support import load_template

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = text[text.index("Parameters: `") :].split("\n\n", 1)[0]
    assert set(load_template()["Parameters"]) <= set(re.findall(r"`([A-Za-z]+)`", paragraph))
