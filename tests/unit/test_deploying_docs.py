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
