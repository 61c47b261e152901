"""The generality table in docs/repos.md is the one the committed results file gives."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from verigap.results import read_result

ROOT = Path(__file__).resolve().parents[2]


def test_docs_table_matches_the_results_file():
    spec = importlib.util.spec_from_file_location(
        "repos_generality", ROOT / "benchmarks" / "repos_generality.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    data = read_result(ROOT / "results" / "repos" / "generality.json")
    doc = (ROOT / "docs" / "repos.md").read_text()
    block = doc.split("<!-- generality:start -->\n", 1)[1].split("\n<!-- generality:end -->")[0]
    assert block == mod.table(data)
    assert all(r["tasks"] or r["reason"] for r in data["projects"])  # every failure says why
    for r in data["projects"]:  # the oracle is paid by both graders, the no-op by neither
        if r["tasks"]:
            g = r["grading"]
            assert g["paid"]["v1/oracle"] == g["paid"]["v2/oracle"] == g["graded"]
            assert g["paid"]["v1/noop"] == g["paid"]["v2/noop"] == 0
