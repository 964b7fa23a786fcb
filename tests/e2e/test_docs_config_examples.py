"""Every configuration example in README.md and docs/*.md is one a person can paste: each YAML or
JSON block that is a tagpin configuration, saved to a file, passes ``tagpin config validate FILE``
(the CLI as a process: exit 0, ``valid: true``), so an example that drifts from the configuration
models (a renamed key, a stale value, a wrong shape) fails here.

A block is a configuration when one of its top-level keys is a key of the document (``clusters``,
``images``, ``rollout``...), or an excerpt of one ``images`` entry (a policy written out) when one
is a key of an entry. The other blocks (Kubernetes manifests, a registry's own ``config.yml``,
RBAC rules, messages, secrets) are not tagpin's configuration. An excerpt is completed, never
loosened: an entry gets a repository and one target; a document without ``clusters`` gets the
clusters the docs' excerpts use (``EXCERPT_CLUSTERS``), so a cluster name the docs never declare
still fails."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tagpin.domain.config import FollowedImage, TagpinConfig

from tests.support.cli import Ran, tagpin
from tests.support.constants import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^[ \t]*```(yaml|json)\n(.*?)^[ \t]*```", re.M | re.S)
DOCUMENT_KEYS = frozenset(TagpinConfig.model_fields)
# An entry's keys but ``image``, which a Kubernetes manifest has too (docs/gitops.md's markers).
ENTRY_KEYS = frozenset(FollowedImage.model_fields) - {"image"}
# The clusters of the docs' excerpts: stage then prod (docs/rollouts.md splits prod in two regions).
EXCERPT_CLUSTERS = ("stage", "prod", "prod-eu", "prod-us")
EXCERPT_TARGET = {"cluster": "prod", "namespace": "web", "name": "web", "container": "web"}
# Pages that show configuration (a few of them, not all): the search must find theirs.
SHOWN_IN = ("README.md", "docs/approvals.md", "docs/deploying.md", "docs/policies.md", "docs/trust.md")


@dataclass(frozen=True)
class Example:
    where: str  # docs/x.md:LINE, the block's opening fence
    text: str
    data: Any


def examples() -> list[Example]:
    """Every YAML or JSON block of the docs that is a tagpin configuration, or an excerpt of one."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in BLOCK.finditer(text):
            data = yaml.safe_load(block.group(2))
            if isinstance(data, dict) and set(data) & (DOCUMENT_KEYS | ENTRY_KEYS):
                line = text.count("\n", 0, block.start()) + 1
                found.append(Example(f"{doc.relative_to(ROOT)}:{line}", block.group(2), data))
    return found


def completed(example: Example) -> Any:
    """The example as a whole document: an ``images`` entry's excerpt inside an entry, a document
    without ``clusters`` with the excerpts' clusters declared."""
    document = example.data
    if not set(document) & DOCUMENT_KEYS:
        repository = "registry.example.com/team/web"
        entry = {"image": repository if "policy" in document else f"{repository}:stable"}
        document = {"images": [entry | {"targets": [EXCERPT_TARGET]} | document]}
    if "clusters" not in document:
        stubs = {name: {"eks": {"name": name, "region": "eu-west-1"}} for name in EXCERPT_CLUSTERS}
        document = {"clusters": stubs} | document
    return document


EXAMPLES = examples()


def test_the_docs_have_configuration_examples() -> None:
    """The search finds them (a broken pattern would pass every example by finding none)."""
    where = {example.where.split(":")[0] for example in EXAMPLES}
    assert set(SHOWN_IN) <= where
    assert len(EXAMPLES) >= 12


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.where for e in EXAMPLES])
def test_a_configuration_example_validates(example: Example, tmp_path: Path) -> None:
    path = tmp_path / "tagpin.yaml"
    document = completed(example)
    path.write_text(example.text if document is example.data else yaml.safe_dump(document), encoding="utf-8")
    ran = tagpin("--json", "config", "validate", str(path))
    assert ran.code == 0, f"{example.where}: {ran.err.strip()}"
    assert ran.json()["valid"] is True


def test_an_invalid_document_names_the_field_as_the_readme_says(tmp_path: Path) -> None:
    """The README's example with a cluster mistyped fails with the message the README quotes."""
    readme = next(e for e in EXAMPLES if e.where.startswith("README.md") and "clusters" in e.data)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"e\.g\.\n?`(images\.\d+\.targets\.\d+\.cluster: [^`]+)`", text)
    assert quoted is not None
    path = tmp_path / "tagpin.yaml"
    path.write_text(readme.text.replace("- {cluster: lab,", "- {cluster: prd,", 1), encoding="utf-8")
    ran = tagpin("config", "validate", str(path))
    assert ran.code == 2 and ran.out == ""
    assert ran.err == f"error: {path}: {quoted.group(1)}\n"


def test_kms_keys_are_named_as_trust_md_says(tmp_path: Path) -> None:
    """docs/trust.md: a key ARN or an alias ARN (read in its region), a key id or an alias name;
    an ARN that is neither is refused by ``tagpin config validate`` (before, it passed and every
    digest of the image was then blocked at rollout time)."""
    assert "An ARN that is neither is refused by `tagpin config validate`" in " ".join(
        (ROOT / "docs/trust.md").read_text().split()
    )
    path = tmp_path / "tagpin.yaml"

    def validate(key: str) -> Ran:
        gate = {"keys": [{"kms": key}]}
        entry = {
            "image": "registry.example.com/team/web:stable",
            "signatures": gate,
            "targets": [EXCERPT_TARGET],
        }
        path.write_text(yaml.safe_dump(completed(Example("kms", "", {"images": [entry]}))), encoding="utf-8")
        return tagpin("config", "validate", str(path))

    for named in (
        "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "arn:aws:kms:eu-west-1:111122223333:alias/release",
        "1234abcd-12ab-34cd-56ef-1234567890ab",
        "alias/release",
    ):
        assert validate(named).code == 0, named
    refused = validate("arn:aws:s3:::release-keys")
    assert refused.code == 2 and refused.out == ""
    assert "not a KMS key ARN" in refused.err and "arn:aws:s3:::release-keys" in refused.err
