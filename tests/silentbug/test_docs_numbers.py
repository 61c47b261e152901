"""The silent-bug page's calibration, ablation and comparison tables agree with the committed
calibration (``bugs/baselines.json``, ``bugs/ablation.json``); the eval tables are generated from
``results/silentbug/`` by docs markers (checked by tests/test_docs.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from verigap.silentbug.bank import bugs_dir
from verigap.silentbug.calibrate import read_baselines

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "silentbug.md").read_text()
CAL = read_baselines()


def rows(first_cell: str) -> list[list[str]]:
    """Cells of every table row of the page whose first cell matches ``first_cell``."""
    out = []
    for line in DOC.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and re.fullmatch(first_cell, cells[0]):
            out.append(cells)
    return out


def ms(arm: dict) -> str:
    return f"{arm['mean']:.1f} ± {arm['std']:.1f}"


def test_calibration_table_matches_the_committed_calibration() -> None:
    table = {cells[0].strip("`"): cells for cells in rows(r"`\w+`") if len(cells) == 8}
    assert set(table) == set(CAL["bugs"])  # every bug, and only bugs
    for bug_id, b in CAL["bugs"].items():
        _, substrate, cls, clean, broken, margin, _, verdict = table[bug_id]
        assert (substrate, cls, verdict) == (b["substrate"], b["class"], b["verdict"])
        assert clean == ms(b["clean"])
        assert broken == (ms(b["broken"]) if b["broken"]["scores"] else "not run")
        if b["broken"]["scores"]:
            assert margin == f"{b['margin']:.1f}"
    for name, sub in CAL["substrates"].items():
        (cells,) = [c for c in rows(re.escape(name)) if len(c) == 3]
        assert cells[2] == ms(sub["clean"])
        assert cells[1] == ", ".join(f"{x:.1f}" for x in sub["clean"]["scores"])


def test_ablation_table_matches_the_committed_ablation() -> None:
    ablation = json.loads((bugs_dir() / "ablation.json").read_text())["rows"]
    table = {(c[0], c[1]): c for c in rows(r"(acrobot|cartpole)_modular") if len(c) == 7 and not c[1].isdigit()}  # not the curves table
    assert set(table) == {(r["substrate"], r["mechanism"]) for r in ablation}
    for r in ablation:
        cells = table[(r["substrate"], r["mechanism"])]
        per_seed = ", ".join(f"{x:.1f}" for x in r["ablated"]["scores"])
        assert cells[3] == f"{ms(r['ablated'])} ({per_seed})"
        assert cells[4] == f"{r['margin']:.1f}"
        assert cells[6] == ("yes" if r["load_bearing"] else "no")


def test_comparison_counts_match_the_committed_calibration() -> None:
    verdicts = [b["verdict"] for b in CAL["bugs"].values()]
    accepted = CAL["summary"]["accepted"]
    (row,) = rows("accepted bugs")
    assert row[2].startswith(f"{accepted}/{len(verdicts)} ")
    assert f"{verdicts.count('rejected')} rejected, {verdicts.count('refused')} refused" in row[2]
    for label, prefix in (("omission bugs on CartPole", "cartpole_"),
                          ("omission bugs on a harder task", "acrobot_")):
        (row,) = rows(label)
        ours = {k: b["verdict"] for k, b in CAL["bugs"].items()
                if b["class"] == "omission" and k.startswith(prefix)}
        n_ok = sum(v == "accepted" for v in ours.values())
        assert row[2].startswith(f"{n_ok}/{len(ours)} accepted")
        for k, v in ours.items():
            assert f"{k}: {v}" in row[2]


def test_readme_bank_counts_match_the_committed_calibration() -> None:
    readme = (ROOT / "README.md").read_text()
    n = len(CAL["bugs"])
    assert f"{CAL['summary']['accepted']} of {n} accepted" in readme
