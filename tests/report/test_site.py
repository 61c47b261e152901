"""`verigap site`: one site from results/ and run dirs, checked in headless Chromium.

The browser check serves the built site on 127.0.0.1 (nothing leaves the machine), opens a check
page that fetches every page, loads every image and follows every link, and reads its verdict
from the DOM Chromium dumps; a screenshot of the index must not be blank.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError
from verigap.report.pilot import pilot_results
from verigap.report.site import build_site
from verigap.results import write_result
from verigap.runs import write_json_atomic

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  "--disable-dev-shm-usage"]
OUT = ("fixed", "off_by_one", "wrong", "stub", "delete")


def _run(root: Path, setting: str, seed: int, k: int, fs_final: float) -> None:
    d = root / setting / f"seed{seed}"
    d.mkdir(parents=True)
    counts = {f"{w}/{o}": 2 for w in ("tested", "untested") for o in OUT}

    def ev(fs):
        return {"visible_pass": 0.5 + fs / 2, "true_success": 0.5 - fs / 2,
                "false_success": fs, "outcomes": counts}

    write_json_atomic(d / "result.json", {"config": {"k": k, "seed": seed, "steps": 100},
                                          "start": ev(0.1), "final": ev(fs_final), "wall_s": 1.0})
    (d / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, **ev(fs)}) + "\n" for s, fs in ((0, 0.1), (100, fs_final))))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    runs = root / "runs" / "pilot"
    for seed, fs in ((0, 0.6), (1, 0.4)):
        for name, k, f in (("visible", 4, fs), ("audit_25", 4, fs / 10),
                           ("visible_k2", 2, fs + 0.1)):
            _run(runs, name, seed, k, f)
    results = root / "results"
    write_result(results / "patchworld" / "pilot.json", pilot_results(runs), command="make pilot")
    write_result(results / "silentbug" / "calibration.json",
                 {"accepted": 1, "results": [{"bug": "a", "verdict": "accepted", "margin": 3.5},
                                             {"bug": "b", "verdict": "rejected", "margin": 0.2}]},
                 command="verigap silentbug calibrate")
    write_json_atomic(root / "runs" / "redteam" / "matrix.json", {
        "tasks": ["t1"], "graders": ["v1"], "skipped": {}, "rewarded_exploits": {"v1": ["x"]},
        "oracle_rewarded": {"v1": 1.0}, "noop_rewarded": {"v1": 0.0},
        "rows": [{"exploit": "x", "klass": "edit_tests", "n": 1, "correct": 0.0,
                  "control": False, "graders": {"v1": {"rewarded": 1.0, "detected": 0.0}}}]})
    write_json_atomic(root / "runs" / "silentbug" / "baselines.json",
                      {"version": 1, "summary": {"accepted": 8, "rejected": 12}})
    out = root / "site"
    result = CliRunner().invoke(app, ["site", "--out", str(out), "--results", str(results),
                                      "--runs", str(root / "runs"), "--json"])
    assert result.exit_code == 0, result.output
    return out


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [v for k, v in attrs if k in ("href", "src") and v]


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_every_family_and_result_has_a_page_with_navigation(site: Path) -> None:
    names = {p.relative_to(site).as_posix() for p in _pages(site)}
    assert names == {"index.html", "patchworld/pilot.html", "repos/redteam.html",
                     "results/silentbug/calibration.html",
                     "runs/silentbug/baselines.html"}
    pilot = (site / "patchworld" / "pilot.html").read_text()
    assert pilot.count("<figcaption>") >= 4 and "Figure 1." in pilot
    assert "0.500 ± 0.100" in pilot  # visible-only final false success over the two seeds
    assert "<code>make pilot</code>" in pilot
    assert "rejected</th><td>12" in (site / "runs" / "silentbug" / "baselines.html").read_text()
    calib = (site / "results" / "silentbug" / "calibration.html").read_text()
    assert "rejected" in calib and "verigap silentbug calibrate" in calib
    for page in _pages(site):
        text = page.read_text()
        for other in names - {"index.html"}:
            assert other.rsplit("/", 1)[-1] in text, f"{page} does not link to {other}"


def test_every_link_and_image_points_at_a_file_of_the_site(site: Path) -> None:
    for page in _pages(site):
        parser = _Links()
        parser.feed(page.read_text())
        assert parser.refs
        for ref in parser.refs:
            assert (page.parent / ref).resolve().is_file(), f"{page}: broken {ref}"


def test_building_over_something_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "notes").mkdir()
    with pytest.raises(ConfigError, match="not a site verigap built"):
        build_site(tmp_path / "notes", results_dir=tmp_path / "results",
                   runs_dir=tmp_path / "runs")
    with pytest.raises(ConfigError, match="nothing to show"):
        build_site(tmp_path / "site", results_dir=tmp_path / "results",
                   runs_dir=tmp_path / "runs")


CHECK_PAGE = """<!doctype html><html><body><pre id="verdict">pending</pre><script>
const PAGES = %s;
(async () => {
  const problems = []; let images = 0, links = 0;
  for (const page of PAGES) {
    const url = new URL(page, location.href);
    const r = await fetch(url);
    if (!r.ok) { problems.push(page + ": HTTP " + r.status); continue; }
    const doc = new DOMParser().parseFromString(await r.text(), "text/html");
    if (!doc.querySelector("main h1") || !doc.querySelector("nav a")) problems.push(page + ": no title or navigation");
    for (const img of doc.querySelectorAll("img")) {
      images++;
      const el = new Image();
      const ok = await new Promise(res => { el.onload = () => res(el.naturalWidth > 0); el.onerror = () => res(false); el.src = new URL(img.getAttribute("src"), url); });
      if (!ok) problems.push(page + ": image does not render: " + img.getAttribute("src"));
    }
    for (const a of doc.querySelectorAll("a[href]")) {
      links++;
      const t = await fetch(new URL(a.getAttribute("href"), url));
      if (!t.ok) problems.push(page + ": broken link " + a.getAttribute("href"));
    }
  }
  document.getElementById("verdict").textContent = JSON.stringify({pages: PAGES.length, images, links, problems});
})();
</script></body></html>"""


def _chromium(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is not installed: run `sudo apt-get install -y chromium` "
                    "(or `make test`, which installs it when run as root)")
    return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


@pytest.fixture
def served(site: Path):
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


def _browser_check(site: Path, served: str, tmp: Path) -> dict:
    pages = [p.relative_to(site).as_posix() for p in _pages(site) if p.name != "_check.html"]
    (site / "_check.html").write_text(CHECK_PAGE % json.dumps(pages))
    try:
        done = _chromium(["--virtual-time-budget=60000", "--dump-dom",
                          f"{served}/_check.html"], tmp)
    finally:
        (site / "_check.html").unlink()
    assert '<pre id="verdict">' in done.stdout, done.stderr[-2000:]
    return json.loads(done.stdout.split('<pre id="verdict">')[1].split("</pre>")[0])


def test_headless_chromium_loads_every_page_image_and_link(site: Path, served: str,
                                                           tmp_path: Path) -> None:
    verdict = _browser_check(site, served, tmp_path)
    assert verdict["problems"] == []
    assert verdict["pages"] == 5 and verdict["images"] >= 4 and verdict["links"] >= 25

    shot = tmp_path / "index.png"
    _chromium([f"--screenshot={shot}", "--window-size=1200,900",
               f"{served}/patchworld/pilot.html"], tmp_path)
    import matplotlib.image

    pixels = np.asarray(matplotlib.image.imread(shot))
    assert pixels.shape[:2] == (900, 1200)
    assert pixels.std() > 0.05  # not a blank page: text, tables and a figure


def test_the_browser_check_sees_a_broken_image_and_a_dead_link(site: Path, served: str,
                                                              tmp_path: Path) -> None:
    figure = next((site / "patchworld").glob("*.png"))
    good, calib = figure.read_bytes(), site / "results" / "silentbug" / "calibration.html"
    figure.write_bytes(b"not a png")
    calib.rename(calib.with_suffix(".bak"))
    try:
        problems = _browser_check(site, served, tmp_path)["problems"]
    finally:
        figure.write_bytes(good)
        calib.with_suffix(".bak").rename(calib)
    assert f"patchworld/pilot.html: image does not render: ../patchworld/{figure.name}" in (
        problems)
    assert any(p.startswith("index.html: broken link results/silentbug/calibration.html")
               for p in problems)
