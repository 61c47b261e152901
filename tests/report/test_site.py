"""`verigap site`: the write-up built from results/, checked in headless Chromium (Selenium).

The fixture site is built from a small, hand-made results/ (a pilot, an experiment log with
every kind of verdict, one file no page cites) and run directories; one test builds the site
from the repository's own results/ and opens every page of it in the browser.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError
from verigap.report import browser
from verigap.report.log import is_sanity, reading
from verigap.report.pilot import pilot_results
from verigap.report.site import build_site
from verigap.results import write_result
from verigap.runs import write_json_atomic

REPO = Path(__file__).resolve().parents[2]
OUT = ("fixed", "off_by_one", "wrong", "stub", "delete")


def _run(root: Path, setting: str, seed: int, k: int, fs_final: float) -> None:
    d = root / setting / f"seed{seed}"
    d.mkdir(parents=True)
    counts = {f"{w}/{o}": 2 for w in ("tested", "untested") for o in OUT}

    def ev(fs):
        return {
            "visible_pass": 0.5 + fs / 2,
            "true_success": 0.5 - fs / 2,
            "false_success": fs,
            "outcomes": counts,
        }

    write_json_atomic(
        d / "result.json",
        {
            "config": {"k": k, "seed": seed, "steps": 100},
            "start": ev(0.1),
            "final": ev(fs_final),
            "wall_s": 1.0,
        },
    )
    (d / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, **ev(fs)}) + "\n" for s, fs in ((0, 0.1), (100, fs_final)))
    )


def _prediction(pid: str, verdict: str, **extra) -> dict:
    return {
        "id": pid,
        "verdict": verdict,
        "question": f"question of {pid}?",
        "prediction": f"prediction of {pid}",
        "criterion_text": "final_false_success > 0.4",
        "criterion": {
            "compare": ">",
            "value": 0.4,
            "confidence": 0.9,
            "metric": "final_false_success",
        },
        "statistic": 0.5,
        "interval": [0.45, 0.55],
        "n_seeds": 3,
        "reason": "the whole 90% interval satisfies > 0.4",
        "superseded": [],
        **extra,
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    runs = root / "runs" / "pilot"
    for seed, fs in ((0, 0.6), (1, 0.4)):
        for name, k, f in (
            ("visible", 4, fs),
            ("audit_25", 4, fs / 10),
            ("visible_k2", 2, fs + 0.1),
        ):
            _run(runs, name, seed, k, f)
    results = root / "results"
    write_result(results / "patchworld" / "pilot.json", pilot_results(runs), command="make pilot")
    original = _prediction("E03", "supported", criterion_text="final_false_success > 0.9")
    write_result(
        results / "experiments" / "verdicts.json",
        {
            "predictions": {
                "E01": _prediction("E01", "supported"),
                "E02": _prediction("E02", "refuted"),
                "E03": _prediction("E03", "inconclusive", superseded=[original]),
                "E04": _prediction("E04", "supported", sanity_check=True),
            }
        },
        command="verigap experiments run",
    )
    write_result(
        results / "silentbug" / "calibration.json",
        {
            "accepted": 1,
            "results": [
                {"bug": "a", "verdict": "accepted", "margin": 3.5},
                {"bug": "b", "verdict": "rejected", "margin": 0.2},
            ],
        },
        command="verigap silentbug calibrate",
    )
    write_json_atomic(
        root / "runs" / "redteam" / "matrix.json",
        {
            "tasks": ["t1"],
            "graders": ["v1"],
            "skipped": {},
            "rewarded_exploits": {"v1": ["x"]},
            "oracle_rewarded": {"v1": 1.0},
            "noop_rewarded": {"v1": 0.0},
            "rows": [
                {
                    "exploit": "x",
                    "klass": "edit_tests",
                    "n": 1,
                    "correct": 0.0,
                    "control": False,
                    "graders": {"v1": {"rewarded": 1.0, "detected": 0.0}},
                }
            ],
        },
    )
    write_json_atomic(
        root / "runs" / "silentbug" / "baselines.json",
        {"version": 1, "summary": {"accepted": 8, "rejected": 12}},
    )
    out = root / "site"
    result = CliRunner().invoke(
        app,
        [
            "site",
            "--out",
            str(out),
            "--results",
            str(results),
            "--runs",
            str(root / "runs"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    return out


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [v for k, v in attrs if k in ("href", "src") and v and v != "data:,"]


def _pages(site: Path) -> set[str]:
    return {p.relative_to(site).as_posix() for p in site.rglob("*.html")}


def test_the_pilot_results_carry_the_curves_and_outcomes_the_figures_need(site: Path) -> None:
    data = json.loads((site.parent / "results" / "patchworld" / "pilot.json").read_text())["data"]
    assert data["curves"]["visible"]["step"] == [0, 100]
    assert data["curves"]["visible"]["false_success"] == [0.1, 0.5]  # mean of 0.6 and 0.4
    assert data["outcomes"]["visible"]["final"]["untested/delete"] == 0.2  # 2 of 10


def test_families_log_appendix_and_latest_runs_each_have_a_page(site: Path) -> None:
    assert _pages(site) == {
        "index.html",
        "patchworld/pilot.html",
        "experiments/log.html",
        "runs/redteam.html",
        "runs/silentbug/baselines.html",
        "results/index.html",
        "results/patchworld/pilot.html",
        "results/experiments/verdicts.html",
        "results/silentbug/calibration.html",
    }
    pilot = (site / "patchworld" / "pilot.html").read_text()
    assert pilot.count("<figcaption>") == 4 and "Figure 4." in pilot
    assert pilot.index("<p>Patch World") < pilot.index("<figure>") < pilot.index("<table>")
    assert "0.500 ± 0.100" in pilot  # visible-only final false success over the two seeds
    assert "<code>make pilot</code>" in pilot
    assert 'href="../results/patchworld/pilot.html"' in pilot  # raw data as an appendix
    assert (
        'data-kind="appendix"' in (site / "results" / "silentbug" / "calibration.html").read_text()
    )


def test_the_front_page_leads_with_the_finding_and_reaches_every_family(site: Path) -> None:
    index = (site / "index.html").read_text()
    finding = index.index("false success went from 10% to <b>50%</b>")
    assert finding < index.index('src="figures/pilot_gap.png"') < index.index("<h2>")
    assert 'src="figures/pilot_audit_rate.png"' in index
    for page in ("patchworld/pilot.html", "experiments/log.html"):
        assert f'href="{page}"' in index
    assert "Language-model experiment" not in index  # its slot stays empty without results


def test_the_log_leads_with_counts_and_refutations_with_amendments_beside(site: Path) -> None:
    log = (site / "experiments" / "log.html").read_text()
    assert "<b>1 refuted</b>, <b>1 inconclusive</b>, <b>1 supported</b>" in log
    assert "1 sanity checks counted apart" in log
    assert (
        log.index("Refuted (1)")
        < log.index("Inconclusive (1)")
        < log.index("Supported (1)")
        < log.index("Sanity checks (1)")
    )
    e03 = log[log.index('id="E03"') :]
    assert "amended" in e03[:300] and "Original (supported)" in e03
    assert "final_false_success &gt; 0.9" in e03


def test_a_prediction_is_read_in_plain_words_and_sanity_marks_are_found() -> None:
    text = reading(_prediction("E9", "refuted"))
    assert "Measured final_false_success = 0.500 (90% interval 0.450 to 0.550" in text
    assert "needed above 0.4; the data rule that out" in text
    assert is_sanity({"marking": "sanity check"}) and is_sanity({"tags": ["Sanity"]})
    assert not is_sanity({"verdict": "supported"})


def test_every_link_and_image_points_at_a_file_of_the_site(site: Path) -> None:
    for name in _pages(site):
        page = site / name
        parser = _Links()
        parser.feed(page.read_text())
        assert parser.refs
        for ref in parser.refs:
            assert (page.parent / ref.split("#")[0]).resolve().is_file(), f"{page}: broken {ref}"


def test_building_over_something_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "notes").mkdir()
    with pytest.raises(ConfigError, match="not a site verigap built"):
        build_site(tmp_path / "notes", results_dir=tmp_path / "results", runs_dir=tmp_path / "runs")
    with pytest.raises(ConfigError, match="nothing to show"):
        build_site(tmp_path / "site", results_dir=tmp_path / "results", runs_dir=tmp_path / "runs")


def test_a_missing_browser_is_an_error_naming_the_install_line(monkeypatch) -> None:
    monkeypatch.setattr(browser, "CHROMEDRIVER", "/nonexistent/chromedriver")
    with pytest.raises(ConfigError, match="apt-get install -y chromium chromium-driver"):
        browser.require_browser()


def test_headless_chromium_finds_no_problem_on_any_page(site: Path, tmp_path: Path) -> None:
    report = browser.check_site(site)
    assert report.problems == []
    assert report.pages == len(_pages(site)) and report.images >= 5 and report.links >= 40
    shot = browser.screenshot(site, "index.html", tmp_path / "index.png")
    import matplotlib.image

    pixels = np.asarray(matplotlib.image.imread(shot))
    assert pixels.shape[:2] == (900, 1280) and pixels.std() > 0.05  # text and figures


def test_the_browser_check_sees_what_a_reader_would_hit(site: Path, tmp_path: Path) -> None:
    work = tmp_path / "site"
    import shutil

    shutil.copytree(site, work)
    (work / "figures" / "pilot_k.png").write_bytes(b"not a png")
    (work / "results" / "silentbug" / "calibration.html").unlink()
    log = work / "experiments" / "log.html"
    log.write_text(log.read_text().replace("</main>", "<script>undefinedCall();</script></main>"))
    careless = work / "runs" / "redteam.html"
    text = careless.read_text()
    careless.write_text(
        text[: text.index("</h1>") + 5]
        + "<table><tr><td>1</td></tr></table>"
        + text[text.index("</h1>") + 5 :]
    )
    problems = browser.check_site(work).problems
    assert "patchworld/pilot.html: image does not render: ../figures/pilot_k.png" in problems
    assert any(
        p.startswith("results/index.html: broken link results/silentbug/calibration")
        for p in problems
    )
    assert any(
        p.startswith("experiments/log.html: console error") and "undefinedCall" in p
        for p in problems
    )
    assert "runs/redteam.html: opens with data, not prose (not an appendix)" in problems


def test_the_repository_site_passes_the_browser_check_on_every_page(tmp_path: Path) -> None:
    out = tmp_path / "site"
    pages = build_site(out, results_dir=REPO / "results", runs_dir=tmp_path / "no-runs")
    assert len(pages) == len(_pages(out))
    report = browser.check_site(out)
    assert report.problems == []
    index = (out / "index.html").read_text()
    for family in (
        "patchworld/pilot.html",
        "redteam/hackability.html",
        "redteam/detection.html",
        "silentbug/benchmark.html",
        "repos/generality.html",
        "speed.html",
        "experiments/log.html",
    ):
        assert f'href="{family}"' in index, family


def test_the_language_model_slot_fills_only_when_its_results_exist(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_result(
        results / "llm" / "grpo.json", {"false_success": 0.25}, command="verigap llm train"
    )
    build_site(tmp_path / "site", results_dir=results, runs_dir=tmp_path / "runs")
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="llm/index.html"' in index and "Language-model experiment" in index
    assert "0.25" in (tmp_path / "site" / "llm" / "index.html").read_text()


def test_the_language_model_page_draws_its_curves_beside_the_mlp(tmp_path: Path) -> None:
    """A curves file gives the page its figure and status table; a run that has not finished
    is labelled partial with the steps it did."""
    results = tmp_path / "results"
    curve = [
        {"step": 1, "reward": 0.5, "visible_pass": 0.5, "true_success": 0.25, "false_success": 0.25}
    ]
    means = {"all_steps": curve[0], "last_10_steps": curve[0]}
    partial = {
        "status": "partial",
        "steps": 50,
        "steps_done": 1,
        "curve": curve,
        "curve_mean": means,
        "grpo_cost": {"cpu_s_per_step": 30.0, "wall_s_per_step": 40.0},
    }
    rates = {"visible_pass": 0.6, "true_success": 0.1, "false_success": 0.5}
    mlp = {
        "status": "finished",
        "steps": 50,
        "steps_done": 50,
        "start": rates,
        "final": rates,
        "curve": [{**curve[0], "step": 0}, {**curve[0], "step": 50}],
    }
    write_result(
        results / "llm" / "lm_curves.json",
        {
            "registry": "r.yaml",
            "settings": {
                "lm_visible": {"trainer": "language_model", "seeds": {"0": partial}},
                "mlp_visible_50": {"trainer": "numpy_mlp", "seeds": {"0": mlp}},
            },
        },
        command="verigap experiments curves",
    )
    build_site(tmp_path / "site", results_dir=results, runs_dir=tmp_path / "runs")
    page = (tmp_path / "site" / "llm" / "index.html").read_text()
    assert (
        "figures/lm_beside_mlp.png" in page
        and (tmp_path / "site" / "figures" / "lm_beside_mlp.png").is_file()
    )
    assert "partial (1/50)" in page and "finished (50/50)" in page
    assert "averaged over its GRPO steps" in page and "30 / 40" in page
    index = (tmp_path / "site" / "index.html").read_text()
    assert "0 of 2 runs" not in index and "1 of 2 runs of the language-model log finished" in index


def test_a_card_shows_the_first_step_of_a_long_command() -> None:
    from verigap.report.front import short_command

    assert short_command("make pilot") == "make pilot"
    assert short_command("verigap a --out x && verigap b") == "verigap a --out x …"
    long = "python benchmarks/x.py " + " ".join(f"--flag{i} {i}" for i in range(30))
    assert len(short_command(long)) <= 82 and short_command(long).endswith(" …")


def test_a_view_that_needs_a_missing_extra_costs_only_its_table(monkeypatch) -> None:
    from verigap.report import story

    def needs_libcst(data):
        raise ModuleNotFoundError("No module named 'libcst'", name="libcst")

    monkeypatch.setattr(story, "get_view", lambda name: needs_libcst)
    html = story._view("redteam_matrix", {})
    assert "<code>libcst</code>" in html and "pip install -e '.[repos]'" in html
