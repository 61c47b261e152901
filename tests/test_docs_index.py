"""docs/README.md lists every page under docs/, and the README's exploit counts come from a
results file that matches the catalogue as it is now."""

from __future__ import annotations

import re
from pathlib import Path

from verigap.repos.redteam import catalogue
from verigap.results import read_result

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    linked = set(re.findall(r"\]\(([\w.-]+\.md)\)", index))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages - linked == set(), f"list these pages in docs/README.md: {sorted(pages - linked)}"
    assert linked - pages - {"../README.md"} == set(), "docs/README.md links a missing page"


def test_the_catalogue_counts_the_readme_quotes_are_current() -> None:
    assert read_result(ROOT / "results" / "redteam" / "catalogue.json") == catalogue.counts(), (
        "the exploit catalogue changed: run `python -m verigap.repos.redteam.catalogue`, then "
        "`verigap docs`"
    )
    readme = (ROOT / "README.md").read_text()
    assert "results/redteam/catalogue.json value:default_battery" in readme
