"""The red-team page: the hackability matrix as HTML, built from ``matrix.json`` only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape


def build_redteam_page(matrix: dict[str, Any], out: Path) -> Path:
    """Write ``out/report.html`` from a matrix dict (as `verigap redteam` saves it)."""
    env = Environment(loader=PackageLoader("verigap.report", "templates"),
                      autoescape=select_autoescape())
    page = env.get_template("redteam.html.j2").render(m=matrix)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.html").write_text(page)
    return out / "report.html"
