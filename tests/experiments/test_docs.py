"""docs/experiments.md shows exactly the committed verdicts (its table is generated from them)."""

from pathlib import Path

from verigap.experiments.registry import load_registry
from verigap.experiments.render import BEGIN, END, markdown
from verigap.experiments.verdicts import status
from verigap.results import read_result

ROOT = Path(__file__).resolve().parents[2]


def test_doc_table_matches_the_results_file():
    data = read_result(ROOT / "results/experiments/verdicts.json")
    assert data["scale"] == "full"
    rows = status(load_registry(), data["predictions"])
    judged = [r for r in rows if r["verdict"] != "not run"]
    assert len(judged) == len(data["predictions"])
    doc = (ROOT / "docs/experiments.md").read_text()
    block = doc[doc.index(BEGIN) : doc.index(END) + len(END)]
    assert block == markdown(rows), (
        "docs/experiments.md is out of date: run `verigap "
        "experiments verdicts --markdown docs/experiments.md`"
    )
