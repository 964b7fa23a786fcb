"""The docs say what the code does: docs/configuration.md is generated from the configuration
models and must be current; the tables that name the code's values (the webhook's HTTP statuses
and limits, the signature gate's reasons) and every repository path the docs point to are checked
against the code, so that neither can drift."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from tagpin.ports.signatures import SignatureProblem
from tagpin.usecases.webhook import MAX_BODY, MAX_EVENTS
from tagpin_local import docgen

from tests.unit import test_signatures as signatures


def test_configuration_reference_is_current():
    assert docgen.OUT.read_text() == docgen.render(), "docs/configuration.md is out of date: run `make docs`"


def test_every_field_is_described():
    undescribed = [
        line for line in docgen.render().splitlines() if line.startswith("| `") and line.endswith("|  |")
    ]
    assert undescribed == [], f"fields without a description in tagpin/config.py: {undescribed}"


# -- tables and figures in the docs that name the code's values --------------------------------------

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
# A path in the repository, as the docs name one: `layers/...`, (tests/...py), events/webhooks/...
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:layers|functions|tests|tools|events|docs|bench)/[\w./*<>{},-]*[\w*/}>])"
)


def table_after(text: str, marker: str) -> list[list[str]]:
    """The rows (cells, stripped; header and rule left out) of the first Markdown table after
    ``marker``."""
    lines = text[text.index(marker) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def statuses_raised(*paths: Path) -> set[int]:
    """Every HTTP status the webhook code can answer: the literal first argument of each
    ``WebhookError(...)`` and ``WebhookResult(...)``."""
    found: set[int] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("WebhookError", "WebhookResult")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, int)
            ):
                found.add(node.args[0].value)
    return found


def test_every_path_the_docs_name_exists() -> None:
    """A module or folder that moved leaves no pointer behind (patterns such as
    ``functions/<name>/app.py`` are left out)."""
    broken = [
        f"{doc.relative_to(ROOT)}:{number}: {match}"
        for doc in DOCS
        for number, line in enumerate(doc.read_text().splitlines(), 1)
        for match in REPO_PATH.findall(line)
        if not any(c in match for c in "*<{") and not (ROOT / match).exists()
    ]
    assert broken == []


def test_the_webhook_answers_are_the_statuses_the_code_answers() -> None:
    webhooks = ROOT / "layers" / "common" / "tagpin" / "adapters" / "webhooks"
    usecases = ROOT / "layers" / "common" / "tagpin" / "usecases"
    code = statuses_raised(
        *(usecases / f"webhook{part}.py" for part in ("", "_events", "_check")),
        *sorted(webhooks.glob("*.py")),
    )
    rows = {int(row[0]): row[1] for row in table_after((ROOT / "docs/webhooks.md").read_text(), "## Answers")}
    assert set(rows) == code
    assert 413 in code and 400 in code  # the two rows below: guards against an empty parse
    too_large = rows[413]
    assert f"larger than {MAX_BODY // 2**20} MiB" in too_large and MAX_BODY % 2**20 == 0
    assert f"more than {MAX_EVENTS:,} events" in too_large
    assert "larger" not in rows[400]


def signature_reasons() -> dict[str, str]:
    rows = table_after((ROOT / "docs/trust.md").read_text(), "Why a digest is blocked")
    assert len(rows) == len({row[0] for row in rows})
    return {row[0].strip("`"): row[1] for row in rows}


def test_the_signature_reasons_are_the_code_s() -> None:
    assert set(signature_reasons()) == {p.value for p in SignatureProblem}


# A signature changed after signing, in each scheme: what the row of the reason the checker gives
# must say (the checker runs on real signatures, tests/unit/test_signatures.py's cases).
TAMPERED = {
    "cosign: payload changed after signing": "cosign's `.sig` tag scheme",
    "bundle: names our key, signature broken": "a Sigstore bundle's key hint",
    "keyless: signature broken": "a certificate of the trusted root",
}


@pytest.mark.parametrize(("case", "scheme"), TAMPERED.items(), ids=list(TAMPERED))
def test_the_reason_a_tampered_signature_gets_is_documented_as_such(case: str, scheme: str) -> None:
    _name, sign, policy, problem, _scheme = next(c for c in signatures.CASES if c[0] == case)
    img = signatures.image()
    sign(img)
    verdict = signatures.check(img, policy)
    assert verdict.reason is problem is not None
    row = signature_reasons()[verdict.reason.value]
    assert "changed after signing" in row and scheme in row, (verdict.reason, row)
