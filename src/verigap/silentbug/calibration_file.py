"""The calibration file's format: strict JSON (no NaN), read whole, with provenance. Apart from
:mod:`verigap.silentbug.calibrate` so the ablation writes the same format without importing
the calibration that imports it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError
from verigap.results import read_meta


def provenance(path: Path) -> dict[str, Any]:
    try:
        return read_meta(path)
    except ConfigError:  # the first, bare format: no meta
        return {"command": "unknown (written before calibrations carried provenance)"}


def strict(value: Any) -> Any:
    """NaN/inf become None (null) so the file is strict JSON; a missing number is said by
    the verdict and reason beside it (e.g. a refused bug's broken runs were not run)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    return value


def read_baselines(path: Path | None = None) -> dict[str, Any]:
    """A calibration file: a results file (``meta`` + ``data``) or the first, bare format."""
    from verigap.silentbug.bank import bugs_dir

    path = path or bugs_dir() / "baselines.json"
    try:
        doc = json.loads(path.read_text(), parse_constant=_refuse_constant)
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read the calibration ({e}); run calibrate") from e
    return doc["data"] if isinstance(doc, dict) and "meta" in doc and "data" in doc else doc


def _refuse_constant(token: str) -> float:
    raise ValueError(f"holds {token}, which is not strict JSON")
