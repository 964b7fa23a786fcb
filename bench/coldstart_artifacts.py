"""The built artifacts bench/coldstart.py measures: each function's code and layers as the built
template lays them out, their sizes (unzipped with and without .pyc, deflate-zipped: what is
uploaded), and a copy of each without its .pyc (what SAM's default python_pip workflow ships)."""

from __future__ import annotations

import io
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

from tagpin_local.cfn import load_template

MB = 1024 * 1024


def built_layout(build: Path, functions: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Function name -> {"code": dir, "layers": [(name, python dir), ...]} from the built template."""
    template_path = build / "template.yaml"
    if not template_path.exists():
        sys.exit(f"{template_path} not found: run `sam build` first (see docs/build.md)")
    template = load_template(template_path)
    resources: dict[str, Any] = template["Resources"]
    layout: dict[str, dict[str, Any]] = {}
    for fn in functions:
        props = resources[fn]["Properties"]
        layers = []
        for ref in props.get("Layers", []):
            name = ref["Ref"]
            content = build / resources[name]["Properties"]["ContentUri"]
            layers.append((name, content))
        layout[fn] = {"code": build / props["CodeUri"], "layers": layers}
    return layout


def dir_size(path: Path, *, with_pyc: bool = True) -> int:
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and (with_pyc or p.suffix != ".pyc"):
            total += p.stat().st_size
    return total


def zipped_size(path: Path) -> int:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for p in sorted(path.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(path).as_posix())
    return buf.getbuffer().nbytes


def pycless_copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dst


def measure_artifacts(
    layout: dict[str, dict[str, Any]], scratch: Path, *, zipped: bool = True
) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    """Each function's and layer's sizes (once each), and its copy without .pyc under ``scratch``."""
    artifacts: dict[str, dict[str, Any]] = {}
    nopyc: dict[str, Path] = {}
    for fn, info in layout.items():
        for name, path in [(fn, info["code"]), *info["layers"]]:
            if name in artifacts:
                continue
            artifacts[name] = {
                "unzipped_mb": dir_size(path) / MB,
                "unzipped_no_pyc_mb": dir_size(path, with_pyc=False) / MB,
                "pyc_files": sum(1 for _ in path.rglob("*.pyc")),
            }
            if zipped:
                artifacts[name]["zipped_mb"] = zipped_size(path) / MB
            nopyc[name] = pycless_copy(path, scratch / name)
    return artifacts, nopyc
