"""A SAM / CloudFormation template as data: the one YAML loader of the tools, the benchmarks and
the tests (template.yaml, or the one ``sam build`` writes).

CloudFormation's short tags become their long (JSON) form, as CloudFormation itself reads them:
``!Ref X`` is ``{"Ref": "X"}``, ``!Condition C`` is ``{"Condition": "C"}``, ``!GetAtt A.B`` is
``{"Fn::GetAtt": ["A", "B"]}``, and any other ``!Name value`` is ``{"Fn::Name": value}``. Nothing is
evaluated here (tests/unit/template_support.py evaluates intrinsic functions for a parameter set).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class CfnLoader(yaml.SafeLoader):
    """A SafeLoader that reads CloudFormation's short tags as data (their long form)."""


def _tagged(loader: CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix in ("Ref", "Condition"):
        return {suffix: value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _tagged)  # type: ignore[no-untyped-call]


def load_template(path: Path) -> dict[str, Any]:
    """The template at ``path``, its short tags in their long form."""
    with path.open(encoding="utf-8") as fh:
        document = yaml.load(fh, Loader=CfnLoader)  # noqa: S506 (a SafeLoader: tags become data)
    if not isinstance(document, dict):
        raise ValueError(f"{path} is not a template (a YAML mapping)")
    return document
