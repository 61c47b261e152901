"""`verigap site`: one static site from ``results/`` and any run directories.

Pages come from *page providers*: functions ``(SiteInputs) -> list[Page]`` registered with
:func:`provider`. Each family registers its providers in its own module and lists the module in
:data:`PROVIDER_MODULES` (one line). Every results file that no provider claims still gets a page
(its provenance and its data as tables), so a family's numbers appear on the site the day its
results file lands. Pages share one layout: navigation to every page, figures with captions.
"""

from __future__ import annotations

import html
import importlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from verigap.errors import ConfigError
from verigap.results import read_meta, read_result


@dataclass
class Figure:
    file: str  # relative to the site root
    caption: str
    alt: str = ""  # what the image shows, for a reader who cannot see it


@dataclass
class Page:
    file: str  # e.g. "patchworld/pilot.html"
    title: str
    section: str
    intro: str = ""  # HTML
    body: str = ""  # HTML
    figures: list[Figure] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # results files this page shows
    appendix: bool = False  # a results file shown as data, linked from the pages that cite it
    headlines: list[Headline] = field(default_factory=list)  # front-page findings


@dataclass
class Headline:
    """What the front page shows for a family: a finding, one figure, where to read more."""

    title: str
    page: str  # the family page, relative to the site root
    finding: str  # HTML; its numbers are read from results files
    figure: Figure | None
    command: str  # what reproduces the results behind it


@dataclass(frozen=True)
class SiteInputs:
    out: Path
    results_dir: Path
    runs_dir: Path

    def results_files(self) -> list[Path]:
        return sorted(self.results_dir.rglob("*.json")) if self.results_dir.is_dir() else []


Provider = Callable[[SiteInputs], list[Page]]
PROVIDERS: list[Provider] = []

#: Modules that register page providers when imported (one line per family).
PROVIDER_MODULES: list[str] = [
    "verigap.report.story",
    "verigap.report.site",
]

#: The module whose ``front_page(pages, inputs)`` writes the index (by name: it imports this one).
FRONT_MODULE = "verigap.report.front"

_MD = MarkdownIt("commonmark").enable("table")


def md(text: str) -> str:
    """Markdown (a view's output) as HTML."""
    return _MD.render(text)


def provider(fn: Provider) -> Provider:
    if fn not in PROVIDERS:
        PROVIDERS.append(fn)
    return fn


def _rel(page_file: str, target: str) -> str:
    """The link from ``page_file`` to ``target`` (both relative to the site root)."""
    depth = page_file.count("/")
    return "../" * depth + target


LAYOUT = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>verigap · {title}</title><link rel="icon" href="data:,">
<style>
 body {{ font-family: system-ui, sans-serif; margin: 0; color: #222; display: flex;
        line-height: 1.45; }}
 nav {{ width: 12em; flex: none; padding: 0.8em 1em; background: #f4f4f4; min-height: 100vh;
       font-size: 0.85em; }}
 nav h3 {{ margin: 1em 0 0.3em; font-size: 0.8em; text-transform: uppercase; color: #666; }}
 nav a {{ display: block; padding: 2px 0; color: #1d3557; }} nav a.here {{ font-weight: bold; }}
 main {{ padding: 0.6em 2em 2em; max-width: 1150px; flex: 1; min-width: 0; }}
 h1 {{ margin: 0.3em 0; font-size: 1.6em; }} h2 {{ margin-top: 1.4em; font-size: 1.2em; }}
 figure {{ margin: 1em 0; }} figure img {{ max-width: 100%; border: 1px solid #ddd; }}
 figcaption {{ font-size: 0.85em; color: #444; max-width: 60em; }}
 table {{ border-collapse: collapse; font-size: 0.85em; margin: 0.8em 0; display: block;
         overflow-x: auto; max-width: 100%; }}
 td, th {{ border: 1px solid #ccc; padding: 3px 6px; }} th {{ background: #f2f2f2; }}
 .meta {{ color: #555; font-size: 0.85em; }} code {{ background: #f4f4f4; padding: 0 3px; }}
 td.bad {{ background: #f8d7da; color: #9b2226; font-weight: bold; }}
 .hero {{ display: grid; grid-template-columns: 1fr 1fr; gap: 1em; align-items: start; }}
 .hero figure {{ margin: 0; }} .lead {{ font-size: 1.05em; max-width: 62em; }}
 .cards {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr));
          gap: 1em; }}
 .cards > div {{ border: 1px solid #ddd; border-radius: 6px; padding: 0.6em 0.9em; }}
 .cards h3 {{ margin: 0.2em 0 0.4em; font-size: 1em; }} .cards img {{ width: 100%; }}
 .card {{ display: flex; gap: 1em; border-left: 5px solid #8d99ae; padding: 0.2em 0.8em;
         margin: 0.8em 0; background: #fafafa; }}
 .card > div {{ flex: 1; }} .card p {{ margin: 0.3em 0; }} .card .q {{ font-weight: 600; }}
 .card.refuted {{ border-color: #e63946; }} .card.supported {{ border-color: #2a9d8f; }}
 .card.sanity-check {{ border-color: #e9c46a; }}
 .original {{ border-left: 1px dashed #999; padding-left: 0.8em; font-size: 0.9em; }}
 .badge {{ color: white; padding: 1px 6px; border-radius: 3px; font-size: 0.8em;
          background: #8d99ae; }}
 .badge.refuted {{ background: #e63946; }} .badge.supported {{ background: #2a9d8f; }}
</style></head>
<body data-kind="{kind}"><nav><a href="{home}"><b>verigap</b></a>{nav}</nav>
<main><h1>{title}</h1>{intro}{figures}{body}{sources}</main></body></html>
"""


def _nav(pages: list[Page], here: Page) -> str:
    out, section = [], None
    for p in pages:
        if p.file == "index.html" or p.appendix:
            continue
        if p.section != section:
            section = p.section
            out.append(f"<h3>{html.escape(section)}</h3>")
        cls = ' class="here"' if p is here else ""
        out.append(f'<a href="{_rel(here.file, p.file)}"{cls}>{html.escape(p.title)}</a>')
    if any(p.appendix for p in pages):
        cls = ' class="here"' if here.file == APPENDIX_INDEX else ""
        out.append(
            f'<h3>Appendix</h3><a href="{_rel(here.file, APPENDIX_INDEX)}"{cls}>'
            "Every results file, as data</a>"
        )
    return "".join(out)


APPENDIX_INDEX = "results/index.html"


def _sources_html(page: Page, inputs: SiteInputs) -> str:
    if not page.sources:
        return ""
    items = []
    for src in page.sources:
        meta = read_meta(inputs.results_dir / src)
        link = (
            f"<code>results/{html.escape(src)}</code>"
            if page.appendix
            else f'<a href="{_rel(page.file, _page_file(src))}"><code>results/'
            f"{html.escape(src)}</code></a>"
        )
        items.append(
            f"<li>{link}: reproduce with "
            f"<code>{html.escape(meta.get('command', '?'))}</code> (commit "
            f"{html.escape(str(meta.get('git_commit') or '?'))[:10]}, written "
            f"{html.escape(str(meta.get('written_at', '?')))} on "
            f"{meta.get('machine', {}).get('cpus', '?')} CPUs)</li>"
        )
    return f'<h2>Where the numbers come from</h2><ul class="meta">{"".join(items)}</ul>'


def _render(page: Page, pages: list[Page], inputs: SiteInputs) -> str:
    figs = "".join(
        f'<figure><img src="{_rel(page.file, f.file)}" alt="{html.escape(f.alt or f.caption)}">'
        f"<figcaption>Figure {i}. {html.escape(f.caption)}</figcaption></figure>"
        for i, f in enumerate(page.figures, 1)
    )
    return LAYOUT.format(
        title=html.escape(page.title),
        home=_rel(page.file, "index.html"),
        nav=_nav(pages, page),
        intro=page.intro,
        figures=figs,
        body=page.body,
        sources=_sources_html(page, inputs),
        kind="appendix" if page.appendix else "story",
    )


# ---- generic results pages ---------------------------------------------------------------------


def data_html(data: Any, depth: int = 0) -> str:
    """Any results data as HTML: lists of records as tables, mappings as key/value tables."""
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        cols = list(dict.fromkeys(k for r in data for k in r))
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
        rows = "".join(
            "<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in cols) + "</tr>" for r in data
        )
        return f"<table><tr>{head}</tr>{rows}</table>"
    if isinstance(data, dict):
        rows = "".join(
            f"<tr><th>{html.escape(str(k))}</th><td>"
            f"{data_html(v, depth + 1) if depth < 2 else _cell(v)}</td></tr>"
            for k, v in data.items()
        )
        return f"<table>{rows}</table>"
    return _cell(data)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict | list):
        return f"<code>{html.escape(json.dumps(v)[:300])}</code>"
    return html.escape(str(v))


def _page_file(src: str) -> str:
    return "results/" + re.sub(r"\.json$", ".html", src)


# ---- built-in providers ------------------------------------------------------------------------


@provider
def redteam_pages(inputs: SiteInputs) -> list[Page]:
    """The hackability matrix of the latest `verigap redteam` run directory, when present."""
    from verigap.report.redteam import render_redteam

    matrix = inputs.runs_dir / "redteam" / "matrix.json"
    if not matrix.is_file():
        return []
    page = render_redteam(json.loads(matrix.read_text()))
    body = re.search(r"<body>(.*)</body>", page, re.S)
    inner = re.sub(r"<h1>.*?</h1>", "", body.group(1) if body else page, count=1, flags=re.S)
    return [
        Page(
            "runs/redteam.html",
            "Hackability matrix (latest run)",
            "Latest runs",
            f"<p>Which scripted exploits each grader paid in the latest local "
            f"<code>verigap redteam</code> run (<code>{html.escape(str(matrix))}</code>); "
            "the committed matrices are on the Hackability matrix page.</p>",
            inner,
        )
    ]


#: Summaries that commands leave in run directories (under --runs), shown as data until their
#: family moves them to results/ or registers a page: (path under runs, title, section).
RUN_SUMMARIES: list[tuple[str, str, str]] = [
    ("silentbug/baselines.json", "Silent-bug calibration (latest run)", "Latest runs"),
    ("silentbug/ablation.json", "Silent-bug ablation (latest run)", "Latest runs"),
]


@provider
def run_summary_pages(inputs: SiteInputs) -> list[Page]:
    pages = []
    for rel, title, section in RUN_SUMMARIES:
        path = inputs.runs_dir / rel
        if path.is_file():
            pages.append(
                Page(
                    "runs/" + rel.removesuffix(".json") + ".html",
                    title,
                    section,
                    f"<p>The summary the latest local run left in "
                    f"<code>{html.escape(str(path))}</code>, shown as data: it is not "
                    "a committed result, so no page draws conclusions from it.</p>",
                    data_html(json.loads(path.read_text())),
                )
            )
    return pages


def _appendix_pages(inputs: SiteInputs) -> list[Page]:
    """Every results file as data: the appendix the story pages link to for their numbers."""
    pages = []
    for f in inputs.results_files():
        src = f.relative_to(inputs.results_dir).as_posix()
        family = src.split("/")[0] if "/" in src else "other"
        pages.append(
            Page(
                _page_file(src),
                f"results/{src}",
                f"Appendix: {family}",
                "<p class=meta>A results file as data. The pages that cite it tell "
                "what it means.</p>",
                data_html(read_result(f)),
                sources=[src],
                appendix=True,
            )
        )
    return pages


def _appendix_index(pages: list[Page]) -> Page:
    cited: dict[str, list[Page]] = {}
    for p in pages:
        if not p.appendix:
            for src in p.sources:
                cited.setdefault(src, []).append(p)
    rows = []
    for p in pages:
        if p.appendix:
            src = p.sources[0]
            by = (
                ", ".join(
                    f'<a href="{_rel(APPENDIX_INDEX, q.file)}">{html.escape(q.title)}</a>'
                    for q in cited.get(src, [])
                )
                or "—"
            )
            rows.append(
                f'<tr><td><a href="{_rel(APPENDIX_INDEX, p.file)}"><code>'
                f"{html.escape(src)}</code></a></td><td>{by}</td></tr>"
            )
    return Page(
        APPENDIX_INDEX,
        "Appendix: every results file",
        "Appendix",
        "<p>Every committed results file as data, with the pages that read it. Files no "
        "page cites are measurements kept for the record.</p>",
        f"<table><tr><th>results file</th><th>cited by</th></tr>{''.join(rows)}</table>",
        appendix=True,
    )


def load_providers() -> list[Provider]:
    for module in PROVIDER_MODULES:
        importlib.import_module(module)
    return PROVIDERS


def build_site(
    out: Path, *, results_dir: Path = Path("results"), runs_dir: Path = Path("runs")
) -> list[Page]:
    """Write the site into ``out`` (replacing it); returns its pages, the index first."""
    out, results_dir, runs_dir = Path(out), Path(results_dir), Path(runs_dir)
    if not results_dir.is_dir() and not runs_dir.is_dir():
        raise ConfigError(
            f"neither {results_dir} nor {runs_dir} exists; run from the "
            "repository root or pass --results / --runs"
        )
    if out.exists():
        if not (out / "index.html").is_file():
            raise ConfigError(
                f"{out} exists and is not a site verigap built; choose another --out or remove it"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)
    inputs = SiteInputs(out, results_dir, runs_dir)
    pages = [p for fn in load_providers() for p in fn(inputs)]
    appendix = _appendix_pages(inputs)
    if not pages and not appendix:
        raise ConfigError(
            f"nothing to show: no results under {results_dir} and no run "
            f"directories under {runs_dir}"
        )
    pages += appendix
    if appendix:
        pages.append(_appendix_index(pages))
    pages.insert(0, importlib.import_module(FRONT_MODULE).front_page(pages, inputs))
    for p in pages:
        path = out / p.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_render(p, pages, inputs))
    return pages
