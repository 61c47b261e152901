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
from verigap.report.views import get_view
from verigap.results import read_meta, read_result


@dataclass
class Figure:
    file: str  # relative to the site root
    caption: str


@dataclass
class Page:
    file: str  # e.g. "patchworld/pilot.html"
    title: str
    section: str
    intro: str = ""  # HTML
    body: str = ""  # HTML
    figures: list[Figure] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # results files this page shows


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
    "verigap.report.site",
]

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
<head><meta charset="utf-8"><title>verigap · {title}</title>
<style>
 body {{ font-family: system-ui, sans-serif; margin: 0; color: #222; display: flex; }}
 nav {{ width: 15em; padding: 1em; background: #f4f4f4; min-height: 100vh; font-size: 0.9em; }}
 nav h3 {{ margin: 1em 0 0.3em; font-size: 0.85em; text-transform: uppercase; color: #666; }}
 nav a {{ display: block; padding: 2px 0; color: #1d3557; }} nav a.here {{ font-weight: bold; }}
 main {{ padding: 1em 2em; max-width: 1100px; }}
 figure {{ margin: 1.5em 0; }} figure img {{ max-width: 100%; border: 1px solid #ddd; }}
 table {{ border-collapse: collapse; font-size: 0.85em; margin: 0.8em 0; }}
 td, th {{ border: 1px solid #ccc; padding: 3px 6px; }} th {{ background: #f2f2f2; }}
 .meta {{ color: #555; font-size: 0.85em; }} code {{ background: #f4f4f4; padding: 0 3px; }}
 td.bad {{ background: #f8d7da; color: #9b2226; font-weight: bold; }}
</style></head>
<body><nav><a href="{home}"><b>verigap</b></a>{nav}</nav>
<main><h1>{title}</h1>{intro}{figures}{body}{sources}</main></body></html>
"""


def _nav(pages: list[Page], here: Page) -> str:
    out, section = [], None
    for p in pages:
        if p.file == "index.html":
            continue
        if p.section != section:
            section = p.section
            out.append(f"<h3>{html.escape(section)}</h3>")
        cls = ' class="here"' if p is here else ""
        out.append(f'<a href="{_rel(here.file, p.file)}"{cls}>{html.escape(p.title)}</a>')
    return "".join(out)


def _sources_html(page: Page, inputs: SiteInputs) -> str:
    if not page.sources:
        return ""
    items = []
    for src in page.sources:
        meta = read_meta(inputs.results_dir / src)
        items.append(
            f"<li><code>results/{html.escape(src)}</code>: reproduce with "
            f"<code>{html.escape(meta.get('command', '?'))}</code> (commit "
            f"{html.escape(str(meta.get('git_commit') or '?'))[:10]}, written "
            f"{html.escape(str(meta.get('written_at', '?')))} on "
            f"{meta.get('machine', {}).get('cpus', '?')} CPUs)</li>")
    return f'<h2>Where the numbers come from</h2><ul class="meta">{"".join(items)}</ul>'


def _render(page: Page, pages: list[Page], inputs: SiteInputs) -> str:
    figs = "".join(
        f'<figure><img src="{_rel(page.file, f.file)}" alt="{html.escape(f.caption)}">'
        f"<figcaption>Figure {i}. {html.escape(f.caption)}</figcaption></figure>"
        for i, f in enumerate(page.figures, 1))
    return LAYOUT.format(title=html.escape(page.title), home=_rel(page.file, "index.html"),
                         nav=_nav(pages, page), intro=page.intro, figures=figs, body=page.body,
                         sources=_sources_html(page, inputs))


# ---- generic results pages ---------------------------------------------------------------------

def data_html(data: Any, depth: int = 0) -> str:
    """Any results data as HTML: lists of records as tables, mappings as key/value tables."""
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        cols = list(dict.fromkeys(k for r in data for k in r))
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
        rows = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in cols) + "</tr>"
                       for r in data)
        return f"<table><tr>{head}</tr>{rows}</table>"
    if isinstance(data, dict):
        rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>"
                       f"{data_html(v, depth + 1) if depth < 2 else _cell(v)}</td></tr>"
                       for k, v in data.items())
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
def patchworld_pages(inputs: SiteInputs) -> list[Page]:
    """The pilot (figures from run directories when present, tables from results/) and the
    careless engineer's rollout."""
    from verigap.report.pilot import FIGURES, load_runs

    pages = []
    pilot = inputs.results_dir / "patchworld" / "pilot.json"
    runs_dir = inputs.runs_dir / "pilot"
    body, sources, figures = [], [], []
    if pilot.is_file():
        data = read_result(pilot)
        body += ["<h2>Every k=4 setting after 1000 GRPO steps</h2>",
                 md(get_view("pilot")(data)),
                 "<h2>False success against the number of broken branches</h2>",
                 md(get_view("pilot_k")(data))]
        sources.append("patchworld/pilot.json")
    long = inputs.results_dir / "patchworld" / "pilot_long.json"
    if long.is_file():
        body += ["<h2>The 5000-step follow-up</h2>", md(get_view("pilot_long")(read_result(long)))]
        sources.append("patchworld/pilot_long.json")
    if any(runs_dir.glob("*/seed*/result.json")):
        runs = load_runs(runs_dir)
        fig_dir = inputs.out / "patchworld"
        fig_dir.mkdir(parents=True, exist_ok=True)
        for fn, caption in FIGURES:
            path = fn(runs, fig_dir)
            if path is not None:
                figures.append(Figure(f"patchworld/{path.name}", caption))
    if body or figures:
        intro = ("<p>SFT from a careless engineer, then GRPO with a KL penalty under each reward "
                 "scheme; greedy evaluation on held-out programs, mean ± std over seeds. The last "
                 "column quotes the Patch World pilot write-up's stated figures.</p>")
        if figures:
            intro += (f"<p class=meta>Figures drawn from the run directories in "
                      f"<code>{html.escape(str(runs_dir))}</code>.</p>")
        pages.append(Page("patchworld/pilot.html", "Pilot sweep", "Patch World", intro,
                          "".join(body), figures, sources))
    careless = inputs.results_dir / "patchworld" / "careless.json"
    if careless.is_file():
        data = read_result(careless)
        pages.append(Page(
            "patchworld/careless.html", "Careless engineer", "Patch World",
            f"<p>The scripted careless engineer on {data['n']} held-out programs (k={data['k']}, "
            f"reward {html.escape(data['reward'])}): the starting point the pilot trains from.</p>",
            md(get_view("rollout")(data)), sources=["patchworld/careless.json"]))
    return pages


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
    return [Page("repos/redteam.html", "Hackability matrix", "Repo tasks",
                 f"<p class=meta>From <code>{html.escape(str(matrix))}</code>.</p>", inner)]


#: Summaries that commands leave in run directories (under --runs), shown as data until their
#: family moves them to results/ or registers a page: (path under runs, title, section).
RUN_SUMMARIES: list[tuple[str, str, str]] = [
    ("silentbug/baselines.json", "Calibration (latest run)", "Silent bugs"),
    ("silentbug/ablation.json", "Ablation (latest run)", "Silent bugs"),
]


@provider
def run_summary_pages(inputs: SiteInputs) -> list[Page]:
    pages = []
    for rel, title, section in RUN_SUMMARIES:
        path = inputs.runs_dir / rel
        if path.is_file():
            pages.append(Page("runs/" + rel.removesuffix(".json") + ".html", title, section,
                              f"<p class=meta>From <code>{html.escape(str(path))}</code>.</p>",
                              data_html(json.loads(path.read_text()))))
    return pages


def _generic_pages(inputs: SiteInputs, claimed: set[str]) -> list[Page]:
    pages = []
    for f in inputs.results_files():
        src = f.relative_to(inputs.results_dir).as_posix()
        if src in claimed:
            continue
        family = src.split("/")[0] if "/" in src else "other"
        pages.append(Page(_page_file(src), src.rsplit("/", 1)[-1].removesuffix(".json"),
                          family, "", data_html(read_result(f)), sources=[src]))
    return pages


def load_providers() -> list[Provider]:
    for module in PROVIDER_MODULES:
        importlib.import_module(module)
    return PROVIDERS


def build_site(out: Path, *, results_dir: Path = Path("results"),
               runs_dir: Path = Path("runs")) -> list[Page]:
    """Write the site into ``out`` (replacing it); returns its pages, the index first."""
    out, results_dir, runs_dir = Path(out), Path(results_dir), Path(runs_dir)
    if not results_dir.is_dir() and not runs_dir.is_dir():
        raise ConfigError(f"neither {results_dir} nor {runs_dir} exists; run from the "
                          "repository root or pass --results / --runs")
    if out.exists():
        if not (out / "index.html").is_file():
            raise ConfigError(f"{out} exists and is not a site verigap built; choose another "
                              "--out or remove it")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    inputs = SiteInputs(out, results_dir, runs_dir)
    pages = [p for fn in load_providers() for p in fn(inputs)]
    pages += _generic_pages(inputs, {s for p in pages for s in p.sources})
    if not pages:
        raise ConfigError(f"nothing to show: no results under {results_dir} and no run "
                          f"directories under {runs_dir}")
    links = "".join(
        f'<li><a href="{p.file}">{html.escape(p.section)}: {html.escape(p.title)}</a>'
        f'{" (" + str(len(p.figures)) + " figures)" if p.figures else ""}</li>' for p in pages)
    index = Page("index.html", "Results", "", (
        "<p>Every number on these pages is read from a results file under <code>results/</code>"
        " (each names the command that reproduces it) or from run directories under "
        f"<code>{html.escape(str(runs_dir))}</code>.</p>"), f"<ul>{links}</ul>")
    pages.insert(0, index)
    for p in pages:
        path = out / p.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_render(p, pages, inputs))
    return pages
