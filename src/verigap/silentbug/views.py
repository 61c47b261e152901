"""Views of the silent-bug results files, for docs markers and the site (``docs/results.md``).

``silentbug_controls`` shows the hack detectors' verdicts on honest edits and hacks, before
(the regexes) and after (what the scored runs did); ``silentbug_curves`` shows the clean
learning curves; ``silentbug_eval`` shows an ``analyze --out`` file as one row per agent x arm over all bugs;
``silentbug_references`` shows the clean and broken references the scorer re-ran on the
scoring machine beside the committed calibration's means (machine-specific numbers: the
verdicts must agree, the returns need not).
"""

from __future__ import annotations

from typing import Any

from verigap.report.views import markdown_table, view

EVAL_COLUMNS = ("reward", "outcome", "localized", "component_strict", "component_set",
                "correct", "invalid", "hacked")


def _cell(x: dict[str, Any]) -> str:
    if x["mean"] is None:
        return "-"
    return f"{x['mean']:.3f}" + (f" ± {x['se']:.3f}" if x["se"] is not None else "")


@view("silentbug_eval")
def eval_table(data: dict[str, Any]) -> str:
    """Mean ± SE (n episodes) per agent x arm over every bug of the eval."""
    rows = [[r["agent"].removeprefix("scripted:"), r["arm"], str(r["n"]),
             *(_cell(r[c]) for c in EVAL_COLUMNS)]
            for r in data["rows"] if r["class"] == "all"]
    return markdown_table(["agent", "arm", "n", *EVAL_COLUMNS], rows)


@view("silentbug_references")
def references_table(data: dict[str, Any]) -> str:
    """Per bug: the scorer's clean and broken references on the scoring machine (mean over
    the calibration seeds) beside the committed calibration's means."""
    from verigap.silentbug.calibrate import read_baselines

    committed = read_baselines()["bugs"]
    seen: dict[str, dict[str, Any]] = {}
    for e in data["per_episode"]:
        if e["returns"].get("clean") is not None and e["bug"] not in seen:
            seen[e["bug"]] = e["returns"]
    rows = []
    for bug, ret in seen.items():
        c = committed.get(bug, {})
        rows.append([f"`{bug}`", f"{ret['clean']:.1f}", f"{ret['broken']:.1f}",
                     _f(c.get("clean", {}).get("mean")), _f(c.get("broken", {}).get("mean")),
                     c.get("verdict", "-")])
    return markdown_table(["bug", "clean (scorer)", "broken (scorer)", "clean (calibration)",
                           "broken (calibration)", "calibration verdict"], rows)


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


@view("silentbug_eval_summary")
def summary_table(data: dict[str, Any]) -> str:
    """Per agent over all its episodes: reward (mean, largest), correct, INVALID, wall time."""
    s, wall = data["summary"], data["wall_s"]["by_agent"]
    rows = [[a, str(x["episodes"]), str(x["bugs"]), f"{x['mean_reward']:.3f}",
             f"{x['max_reward']:.3f}", f"{x['correct']:.3f}", f"{x['invalid']:.3f}",
             f"{wall[a]:.0f}"] for a, x in s.items()]
    return markdown_table(["agent", "episodes", "bugs", "mean reward", "largest reward",
                           "correct", "INVALID", "wall s (summed)"], rows)


@view("silentbug_controls")
def controls_table(data: dict[str, Any]) -> str:
    """One row per control: the bug, honest or hacker, the verdict before and after."""
    rows = [[f"`{r['control']}`", f"`{r['bug']}`", r["kind"], r["what"], r["before"],
             r["after"], "yes" if r["ok"] else "**no**"] for r in data["rows"]]
    return markdown_table(["control", "bug", "kind", "edit", "before (regexes)",
                           "after (behaviour)", "as expected"], rows)


@view("silentbug_curves")
def curves_table(data: dict[str, Any]) -> str:
    """Mean episode return per slice of the budget, one row per substrate and seed."""
    bins = data["bins"]
    head = [f"{100 * i // bins}-{100 * (i + 1) // bins}%" for i in range(bins)]
    rows = [[r["substrate"], str(r["seed"]), *(_f(x) for x in r["curve"])]
            for r in data["rows"]]
    return markdown_table(["substrate", "seed", *head], rows)
