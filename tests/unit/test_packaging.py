"""What is installed where: the Lambda layers' pins, the package's dependencies (the CLI runs the same
library) and the imports of the library agree, so nothing works locally that fails on Lambda."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

from tests.support.constants import ROOT

LAYERS = [ROOT / "layers/common/requirements.txt", ROOT / "layers/kubernetes/requirements.txt"]
LAYERS += [ROOT / "layers/git/requirements.txt"]  # dulwich: the Git-writing function only
WEBHOOK_ONLY = ROOT / "functions/webhook/requirements.txt"
CONSOLE_ONLY = ROOT / "functions/console/requirements.txt"  # Jinja2: the console renders HTML
PROVIDED_BY_LAMBDA = {"boto3", "botocore"}  # the Lambda Python runtime provides them
# Import name -> distribution name, where they differ.
DISTRIBUTION = {"yaml": "pyyaml", "aws_lambda_powertools": "aws-lambda-powertools", "jwt": "pyjwt"}
DISTRIBUTION |= {"pydantic_core": "pydantic-core"}
DISTRIBUTION |= {"semantic_version": "semantic-version", "sigstore_models": "sigstore-models"}
# Installed by a pinned package above them (sigstore-models: sigstore pins it exactly, ==0.0.6).
TRANSITIVE = {"pydantic-core", "urllib3", "certifi", "sigstore-models"}


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if match := re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)==(\S+)", line):
            found[match.group(1).lower()] = match.group(2)
    return found


def third_party_imports(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "tagpin" and n != "__future__"}


def test_the_package_pins_what_the_layers_ship() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {}
    for spec in project:
        name, _, version = spec.partition("==")
        declared[name.lower()] = version or None
    for layer in LAYERS:
        for name, version in pins(layer).items():
            assert declared.get(name) == version, (
                f"pyproject.toml must pin {name}=={version} as {layer.name} does"
            )


def test_every_library_import_is_installed_on_lambda() -> None:
    shipped = {name for layer in LAYERS for name in pins(layer)} | set(pins(WEBHOOK_ONLY)) | TRANSITIVE
    shipped |= set(pins(CONSOLE_ONLY))
    for module in sorted(third_party_imports(ROOT / "layers/common/tagpin")):
        distribution = DISTRIBUTION.get(module, module).lower()
        assert distribution in shipped or module in PROVIDED_BY_LAMBDA, (
            f"tagpin imports {module}, which no layer installs"
        )
