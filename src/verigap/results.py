"""Committed results: the numbers that docs and the README show, kept as strict JSON data.

Every figure a person reads in this repository comes from a file under ``results/``, written
by the command that produced it. A file holds ``{"meta": {...}, "data": ...}``: ``meta`` says
which command reproduces the data, from which commit, on which machine, library versions and
pinned kernels (``verigap.numerics``), so a reader can tell a machine-specific number (a wall time) from one that must hold
everywhere (a verdict). Strict JSON: NaN and infinities are refused at write time, because a
file that other tools cannot parse is not a result.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from verigap import numerics
from verigap.errors import ConfigError
from verigap.runs import write_json_atomic

#: The repository's results folder (resolved from the current directory).
RESULTS_DIR = Path("results")

_VERSIONED = ("verigap", "numpy", "gymnasium", "torch", "libcst", "pytest")


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _check_finite(value: Any, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(
            f"result value at {where or '<root>'} is {value}: results are strict JSON; "
            "store None (null) for a missing number and say why beside it"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_finite(item, f"{where}[{i}]")


def make_meta(command: str) -> dict[str, Any]:
    """Provenance of a result: the reproducing command, commit, machine and versions, and the
    numerics (the pin, CPU model, BLAS kernel, PyTorch's CPU capability) that made the numbers."""
    return {
        "command": command,
        "git_commit": _git_commit(),
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.machine(),
            "cpus": os.cpu_count(),
        },
        "versions": _versions(),
        "numerics": numerics.record(),
        "argv": sys.argv[1:],
    }


#: Keys whose values measure the run, not the result (time, load): a rerun that changes only
#: these reproduced the file, so the committed file is kept as it is.
VOLATILE_KEYS = frozenset({"wall_s", "cpu_s", "load", "load_average", "written_at"})


def without_volatile(value: Any) -> Any:
    """``value`` with every :data:`VOLATILE_KEYS` entry dropped, at any depth."""
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list | tuple):
        return [without_volatile(v) for v in value]
    return value


def write_result(path: str | Path, data: Any, *, command: str) -> Path:
    """Write ``data`` with its provenance to ``path`` (atomically, strict JSON, sorted keys).

    ``command`` is the shell command a person runs to reproduce the file. When ``path``
    already holds the same data up to :data:`VOLATILE_KEYS` (a reproduction), the file is left
    untouched: rerunning a job must not dirty a checkout whose numbers it reproduced.
    """
    if not command.strip():
        raise ConfigError("write_result needs the command that reproduces the result")
    _check_finite(data, "")
    path = Path(path)
    if path.exists():
        try:
            old = json.loads(path.read_text())["data"]
        except (OSError, ValueError, KeyError, TypeError):
            old = None
        fresh = json.loads(json.dumps(data, sort_keys=True))  # as it would read back
        if old is not None and without_volatile(old) == without_volatile(fresh):
            return path
    write_json_atomic(path, {"meta": make_meta(command), "data": data})
    return path


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such results file; run the command that writes it") from e

    def refuse(token: str) -> float:
        raise ConfigError(f"{path}: holds {token}, which is not strict JSON; rewrite the file")

    try:
        doc = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(doc, dict) or "meta" not in doc or "data" not in doc:
        raise ConfigError(f"{path}: not a results file (expected keys 'meta' and 'data')")
    return doc


def read_result(path: str | Path) -> Any:
    """The ``data`` part of a results file."""
    return _load(Path(path))["data"]


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta`` part of a results file (command, commit, machine, versions)."""
    return _load(Path(path))["meta"]
