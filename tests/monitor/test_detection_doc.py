"""docs/detection.md shows exactly the tables its results files generate."""

from __future__ import annotations

from pathlib import Path

from verigap.monitor import summary

ROOT = Path(__file__).resolve().parents[2]


def test_detection_page_matches_its_results_files():
    page = ROOT / "docs" / "detection.md"
    assert page.read_text() == summary.render_doc(page, ROOT), (
        "regenerate the tables: python -c \"from pathlib import Path; from verigap.monitor "
        "import summary; p = Path('docs/detection.md'); p.write_text(summary.render_doc(p))\"")


def test_fill_replaces_only_the_block():
    doc = "a\n<!-- x -->\nold\n<!-- /x -->\nb\n"
    assert summary.fill(doc, "x", "new") == "a\n<!-- x -->\nnew\n<!-- /x -->\nb\n"
