"""What every result records about the run that produced it: the commit it measured (and whether
the code it covers had uncommitted changes), the date, the machine (CPU model, cores, memory) and
the load average when the run started and when it ended, so that a figure measured on a busy
machine shows as such (``bench/figures.py`` prints the load beside each figure).

Every ``make bench-*`` target runs its bench through this module, which stamps the results file the
bench wrote (``bench/catalog.py`` names it) with a ``run`` record; the benches need not know:

    python -m bench.runinfo poll -- .venv/bin/python bench/poll.py [args]

A results file the command did not rewrite (it failed, or wrote elsewhere) is left alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.catalog import BY_NAME

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def machine() -> dict[str, Any]:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def reference_ms(runs: int = 5) -> float:
    """The machine's speed beside its load: the best of ``runs`` timings of one fixed piece of pure
    Python work (hashing, JSON, sorting; about 30 ms on this project's 2-core machines), in ms. The
    same code every run, so a result measured on a slower machine or a busier core shows a larger
    figure: wall figures of two runs are read against their references, not as a regression."""
    data = [{"tag": f"v{i}", "digest": hashlib.sha256(str(i).encode()).hexdigest()} for i in range(2000)]
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(3):
            text = json.dumps(sorted(data, key=lambda d: d["digest"]))
            hashlib.sha256(text.encode()).hexdigest()
            json.loads(text)
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


def load() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


@dataclass
class Run:
    bench: str
    commit: str
    dirty: bool  # the code the bench covers differed from the commit
    started: str
    load_start: float
    reference_ms: float
    _t0: float = field(default_factory=time.monotonic, repr=False)

    @classmethod
    def begin(cls, bench: str) -> Run:
        covers = BY_NAME[bench].covers
        dirty = bool(_git("status", "--porcelain", "--", *covers))
        return cls(
            bench=bench,
            commit=_git("rev-parse", "HEAD"),
            dirty=dirty,
            started=datetime.now(UTC).isoformat(timespec="seconds"),
            load_start=load(),
            reference_ms=reference_ms(),
        )

    def record(self) -> dict[str, Any]:
        return {
            "bench": self.bench,
            "commit": self.commit,
            "dirty": self.dirty,
            "date": self.started,
            "seconds": round(time.monotonic() - self._t0, 1),
            "machine": machine(),
            "load_start": self.load_start,
            "load_end": load(),
            "reference_ms": self.reference_ms,
            "covers": list(BY_NAME[self.bench].covers),
        }

    def write(self, path: Path, document: dict[str, Any]) -> dict[str, Any]:
        """Write ``document`` with this run's record under ``run`` (the machine's old keys dropped)."""
        document = {"run": self.record(), **{k: v for k, v in document.items() if k != "machine"}}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
        run = document["run"]
        dirty = " (uncommitted changes)" if run["dirty"] else ""
        print(
            f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: commit "
            f"{run['commit'][:10]}{dirty}, "
            f"load {run['load_start']} -> {run['load_end']} on {run['machine']['cores']} cores"
        )
        return document


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or argv[0] not in BY_NAME:
        print("usage: python -m bench.runinfo BENCH -- COMMAND...  (BENCH: " + ", ".join(BY_NAME) + ")")
        return 2
    run = Run.begin(argv[0])
    path = ROOT / "bench" / "results" / f"{argv[0]}.json"
    before = path.stat().st_mtime_ns if path.exists() else 0
    code = subprocess.run(argv[2:], cwd=ROOT, check=False).returncode
    if code == 0 and path.exists() and path.stat().st_mtime_ns != before:
        run.write(path, json.loads(path.read_text(encoding="utf-8")))
    elif code == 0:
        print(f"{path.relative_to(ROOT)} was not rewritten: nothing stamped")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
