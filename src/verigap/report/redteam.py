"""The red-team page: the hackability matrix as HTML, built from ``matrix.json`` only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape


def render_redteam(matrix: dict[str, Any]) -> str:
    """The page's HTML for a matrix dict (as `verigap redteam` saves it)."""
    env = Environment(loader=PackageLoader("verigap.report", "templates"),
                      autoescape=select_autoescape())
    return env.get_template("redteam.html.j2").render(m=matrix)


def build_redteam_page(matrix: dict[str, Any], out: Path) -> Path:
    """Write ``out/report.html`` from a matrix dict."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.html").write_text(render_redteam(matrix))
    return out / "report.html"
