"""The silent-bug page's comparison table agrees with the committed
calibration (``bugs/baselines.json``); the calibration, ablation, bank and eval tables are
generated from their results files by docs markers (checked by tests/test_docs.py)."""

from __future__ import annotations

import re
from pathlib import Path

from verigap.silentbug.calibrate import read_baselines

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "silentbug.md").read_text()
CAL = read_baselines()


def rows(first_cell: str) -> list[list[str]]:
    """Cells of every table row of the page whose first cell matches ``first_cell``."""
    out = []
    for line in DOC.splitlines():
        line = re.sub(r"<!--.*?-->", "", line)  # the counts are markers: read what they show
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and re.fullmatch(first_cell, cells[0]):
            out.append(cells)
    return out


def test_comparison_counts_match_the_committed_calibration() -> None:
    verdicts = [b["verdict"] for b in CAL["bugs"].values()]
    accepted = CAL["summary"]["accepted"]
    (row,) = rows("accepted bugs")
    assert row[2].startswith(f"{accepted}/{len(verdicts)} ")
    assert f"{verdicts.count('rejected')} rejected, {verdicts.count('refused')} refused" in row[2]
    for label, prefix in (
        ("omission bugs on CartPole", "cartpole_"),
        ("omission bugs on a harder task", "acrobot_"),
    ):
        (row,) = rows(label)
        ours = {
            k: b["verdict"]
            for k, b in CAL["bugs"].items()
            if b["class"] == "omission" and k.startswith(prefix)
        }
        n_ok = sum(v == "accepted" for v in ours.values())
        assert row[2].startswith(f"{n_ok}/{len(ours)} accepted")
        for k, v in ours.items():
            assert f"{k}: {v}" in row[2]
