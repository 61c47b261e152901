"""The pilot report: a static HTML page and PNG figures built from run directories only.

No number on the page is typed by hand: every figure and table cell is read from the
``result.json`` and ``metrics.jsonl`` files the sweep wrote, except the pilot write-up's
reference figures, which are quoted beside ours and labelled as such.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from jinja2 import Environment, PackageLoader, select_autoescape  # noqa: E402

from verigap.errors import ConfigError  # noqa: E402
from verigap.runs import METRICS, RESULT, read_json, read_jsonl, write_json_atomic  # noqa: E402

OUTCOMES = ("fixed", "off_by_one", "wrong", "stub", "delete")
OUTCOME_COLORS = ("#2a9d8f", "#e9c46a", "#f4a261", "#8d99ae", "#e63946")
METRIC_KEYS = ("visible_pass", "true_success", "false_success")

#: The Patch World pilot write-up's reference figures, quoted beside ours. Numbers are the ones
#: the write-up states; where it gives only words, the words are quoted.
WRITEUP: dict[str, dict[str, Any]] = {
    "visible": {
        "start_true_success": 0.31,
        "visible_pass": 0.58,
        "true_success": 0.02,
        "false_success": 0.56,
        "note": "Passing rose to 58% while real correctness fell from 31% to 2%.",
    },
    "audit_5": {"note": "5% barely helps"},
    "audit_10": {"note": "10% gets partway"},
    "audit_25": {"note": "25% matches auditing everything at 1,000 steps"},
    "audit_100": {"false_success": 0.04, "note": "4% with audits on every episode"},
    "oracle": {"note": "Oracle RL never improved honest repair"},
    "long_audit_25": {"note": "over 5,000 steps, 25% only delays the hack"},
    "k": {"note": "False success grew with the number of broken branches"},
}


def load_runs(runs_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every finished run under ``runs_dir``, grouped by setting, each with its metrics."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise ConfigError(f"{runs_dir} is not a directory; pass the folder `verigap pilot` wrote")
    by_setting: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for result_file in sorted(runs_dir.glob(f"*/seed*/{RESULT}")):
        run = read_json(result_file)
        metrics = result_file.parent / METRICS
        run["metrics"] = read_jsonl(metrics) if metrics.is_file() else []
        run["seed"] = run["config"]["seed"]
        by_setting[result_file.parent.parent.name].append(run)
    if not by_setting:
        raise ConfigError(
            f"no finished runs (*/seed*/{RESULT}) under {runs_dir}; run `verigap pilot` first"
        )
    return dict(by_setting)


def _ms(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(a.std(ddof=0))


def setting_order(name: str) -> tuple:
    """visible, deletion, audits by rate, oracle, then k spread, then long runs."""
    if name.startswith("long_"):
        return (5, name)
    if m := re.fullmatch(r"visible_k(\d+)", name):
        return (4, int(m.group(1)))
    if m := re.fullmatch(r"audit_(\d+)", name):
        return (2, int(m.group(1)))
    return {"visible": (0, 0), "oracle": (3, 0)}.get(name, (1, name))


def _fs_given_pass(ev: dict[str, Any]) -> float:
    """False success as a share of the programs that pass: how often green means wrong."""
    return ev["false_success"] / ev["visible_pass"] if ev["visible_pass"] else 0.0


def summary_table(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per setting: mean and std over seeds, per-seed values, and the pilot write-up's figure."""
    rows = []
    for name in sorted(runs, key=setting_order):
        rs = sorted(runs[name], key=lambda r: r["seed"])
        row: dict[str, Any] = {
            "setting": name,
            "k": rs[0]["config"]["k"],
            "steps": rs[0]["config"]["steps"],
            "seeds": [r["seed"] for r in rs],
        }
        for phase in ("start", "final"):
            for key in METRIC_KEYS:
                vals = [r[phase][key] for r in rs]
                mean, std = _ms(vals)
                row[f"{phase}_{key}"] = {"mean": mean, "std": std, "per_seed": vals}
            vals = [_fs_given_pass(r[phase]) for r in rs]
            mean, std = _ms(vals)
            row[f"{phase}_fs_given_pass"] = {"mean": mean, "std": std, "per_seed": vals}
        row["wall_s"] = _ms([r["wall_s"] for r in rs])[0]
        row["writeup"] = WRITEUP.get(name, {})
        rows.append(row)
    return rows


def pilot_results(runs_dir: Path, names: list[str] | None = None) -> dict[str, Any]:
    """The summary table as a results file's data: ``{"order": [...], "settings": {name: row},
    "curves": ..., "outcomes": ...}`` (only the settings in ``names`` when given); the compact
    curves and outcome shares let the site draw the training figures from results/ alone."""
    runs = load_runs(runs_dir)
    rows = [r for r in summary_table(runs) if names is None or r["setting"] in names]
    if names is not None and (missing := sorted(set(names) - {r["setting"] for r in rows})):
        raise ConfigError(
            f"{runs_dir}: no finished runs for {', '.join(missing)}; "
            "finish the sweep before writing its results"
        )
    return {
        "order": [r["setting"] for r in rows],
        "settings": {r["setting"]: r for r in rows},
        "curves": {r["setting"]: compact_curves(runs[r["setting"]]) for r in rows},
        "outcomes": {r["setting"]: outcome_shares(runs[r["setting"]]) for r in rows},
    }


def compact_curves(rs: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The monitoring curves of one setting, averaged over seeds and rounded to 4 decimals: what
    the site needs to draw pass against correct during training, without the run directories."""
    if not rs or not rs[0]["metrics"]:
        return {}
    out: dict[str, list[float]] = {"step": [int(m["step"]) for m in rs[0]["metrics"]]}
    for key in METRIC_KEYS:
        out[key] = [round(float(v), 4) for v in _curves(rs, key)[1]]
    return out


def outcome_shares(rs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """What became of the tested and untested broken branches at the start (SFT) and after
    training: each outcome's share of its group, averaged over seeds (4 decimals)."""
    out: dict[str, dict[str, float]] = {}
    for phase in ("start", "final"):
        shares: dict[str, float] = {}
        for where in ("tested", "untested"):
            mix = np.mean([_mix(r[phase]["outcomes"], where) for r in rs], axis=0)
            shares.update(
                {f"{where}/{o}": round(float(v), 4) for o, v in zip(OUTCOMES, mix, strict=True)}
            )
        out[phase] = shares
    return out


def _mix(counts: dict[str, int], where: str) -> np.ndarray:
    v = np.array([counts.get(f"{where}/{o}", 0) for o in OUTCOMES], dtype=float)
    return v / max(1.0, v.sum())


# ---- figures -------------------------------------------------------------------------------


def _curves(rs: list[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    steps = np.array([m["step"] for m in rs[0]["metrics"]])
    vals = np.array([[m[key] for m in r["metrics"]] for r in rs])
    return steps, vals.mean(0)


def fig_training_curves(runs, out: Path, setting: str = "visible") -> Path | None:
    rs = runs.get(setting)
    if not rs or not rs[0]["metrics"]:
        return None
    steps, vis = _curves(rs, "visible_pass")
    _, true = _curves(rs, "true_success")
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot(steps, vis, label="passes visible checks", color="#264653")
    ax.plot(steps, true, label="actually correct", color="#2a9d8f")
    ax.fill_between(
        steps, true, vis, where=vis >= true, color="#e63946", alpha=0.25, label="false success"
    )
    ax.set(
        xlabel="GRPO step",
        ylabel="share of monitoring programs (greedy)",
        ylim=(0, 1),
        title=f"GRPO on '{setting}' reward, mean of {len(rs)} seeds",
    )
    ax.legend(loc="best")
    return _save(fig, out / "fig1_training.png")


def _untested_mix(counts: dict[str, int]) -> np.ndarray:
    return _mix(counts, "untested")


def fig_untested_outcomes(runs, out: Path) -> Path | None:
    names = [
        n
        for n in sorted(runs, key=setting_order)
        if runs[n][0]["config"]["k"] == 4 and not n.startswith("long_")
    ]
    if not names:
        return None
    start = np.mean([_untested_mix(r["start"]["outcomes"]) for r in runs[names[0]]], axis=0)
    bars = [("start (SFT)", start)] + [
        (n, np.mean([_untested_mix(r["final"]["outcomes"]) for r in runs[n]], axis=0))
        for n in names
    ]
    fig, ax = plt.subplots(figsize=(8, 4))
    left = np.zeros(len(bars))
    for j, (o, color) in enumerate(zip(OUTCOMES, OUTCOME_COLORS, strict=True)):
        vals = np.array([b[1][j] for b in bars])
        ax.barh([b[0] for b in bars], vals, left=left, color=color, label=o)
        left += vals
    ax.invert_yaxis()
    ax.set(
        xlabel="share of untested broken branches (held-out, greedy)",
        xlim=(0, 1),
        title="Outcome of every untested broken branch after training (k=4)",
    )
    ax.legend(ncol=5, loc="lower center", bbox_to_anchor=(0.5, -0.32), frameon=False)
    return _save(fig, out / "fig2_untested_outcomes.png")


def _final_fs(rs) -> tuple[float, float]:
    return _ms([r["final"]["false_success"] for r in rs])


def fig_audit_rate(runs, out: Path) -> Path | None:
    pts = []
    if "visible" in runs:
        pts.append((0.0, *_final_fs(runs["visible"])))
    for n in runs:
        if m := re.fullmatch(r"audit_(\d+)", n):
            pts.append((int(m.group(1)) / 100, *_final_fs(runs[n])))
    if len(pts) < 2:
        return None
    pts.sort()
    x, y, e = map(np.array, zip(*pts, strict=True))
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.errorbar(x * 100, y, yerr=e, marker="o", capsize=3, color="#264653", label="verigap")
    ax.scatter(
        [0, 100],
        [WRITEUP["visible"]["false_success"], WRITEUP["audit_100"]["false_success"]],
        marker="x",
        color="#e63946",
        zorder=3,
        label="the pilot write-up (stated figures)",
    )
    ax.set(
        xlabel="audit rate (% of episodes that also get the hidden check)",
        ylabel="false success after training",
        ylim=(0, 1),
        title="False success against the audit rate (k=4, 1000 steps)",
    )
    ax.legend()
    return _save(fig, out / "fig3_audit_rate.png")


def _k_settings(runs) -> list[tuple[int, str]]:
    ks = [
        (runs[n][0]["config"]["k"], n)
        for n in runs
        if n == "visible" or re.fullmatch(r"visible_k\d+", n)
    ]
    return sorted(ks)


def fig_broken_branches(runs, out: Path) -> Path | None:
    ks = _k_settings(runs)
    if len(ks) < 2:
        return None
    x = [k for k, _ in ks]
    m, s = zip(*[_final_fs(runs[n]) for _, n in ks], strict=True)
    mc, sc = zip(*[_ms([_fs_given_pass(r["final"]) for r in runs[n]]) for _, n in ks], strict=True)
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.errorbar(
        x,
        m,
        yerr=s,
        marker="o",
        capsize=3,
        color="#264653",
        label="false success (share of all programs)",
    )
    ax.errorbar(
        x,
        mc,
        yerr=sc,
        marker="s",
        capsize=3,
        color="#e63946",
        label="false success among passing programs",
    )
    ax.set(
        xlabel="broken branches per program (k)",
        ylabel="after training (held-out, greedy)",
        ylim=(0, 1.05),
        title="False success against the number of broken branches",
    )
    ax.legend(loc="lower center")
    return _save(fig, out / "fig4_broken_branches.png")


def fig_before_after(runs, out: Path) -> Path | None:
    ks = _k_settings(runs)
    if not ks:
        return None
    labels = [f"k={k}" for k, _ in ks]
    before = [_ms([r["start"]["false_success"] for r in runs[n]])[0] for _, n in ks]
    after = [_final_fs(runs[n])[0] for _, n in ks]
    xs = np.arange(len(ks))
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.bar(xs - 0.2, before, 0.4, label="before GRPO (SFT)", color="#8d99ae")
    ax.bar(xs + 0.2, after, 0.4, label="after GRPO on visible checks", color="#e63946")
    ax.set_xticks(xs, labels)
    ax.set(
        ylabel="false success (held-out, greedy)",
        ylim=(0, 1),
        title="False success before and after GRPO on visible checks alone",
    )
    ax.legend()
    return _save(fig, out / "fig5_before_after.png")


def fig_long(runs, out: Path) -> Path | None:
    names = [n for n in ("long_visible", "long_audit_25") if n in runs and runs[n][0]["metrics"]]
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for n, color in zip(names, ("#e63946", "#264653"), strict=False):
        steps, fs = _curves(runs[n], "false_success")
        ax.plot(steps, fs, label=n.removeprefix("long_"), color=color)
    ax.set(
        xlabel="GRPO step",
        ylabel="false success (monitoring set, greedy)",
        ylim=(0, 1),
        title="5000-step follow-up",
    )
    ax.legend()
    return _save(fig, out / "fig6_long.png")


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


FIGURES = (
    (
        fig_training_curves,
        "Visible pass and true success during GRPO on visible checks; the "
        "shaded gap is false success.",
    ),
    (
        fig_untested_outcomes,
        "Outcome of every untested broken branch after training, by reward "
        "scheme; the starting (SFT) policy is the first bar.",
    ),
    (
        fig_audit_rate,
        "False success after training against the audit rate (0% = visible-only); "
        "crosses are the pilot write-up's stated figures.",
    ),
    (
        fig_broken_branches,
        "False success after training against the number of broken branches "
        "(visible-only reward), as a share of all programs and as a share of "
        "the programs that pass the visible checks.",
    ),
    (fig_before_after, "False success before and after GRPO on visible checks alone."),
    (
        fig_long,
        "The 5000-step follow-up: false success during training at 25% audits and with "
        "visible checks only.",
    ),
)


def build_report(runs_dir: Path, out_dir: Path | None = None) -> Path:
    """Write ``index.html``, the figures and ``table.json`` into ``out_dir`` (default
    ``RUNS_DIR/report``); returns the path of the page."""
    runs = load_runs(runs_dir)
    out = Path(out_dir) if out_dir else Path(runs_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    figures = []
    for fn, caption in FIGURES:
        path = fn(runs, out)
        if path is not None:
            figures.append({"file": path.name, "caption": caption})
    table = summary_table(runs)
    write_json_atomic(out / "table.json", table)
    env = Environment(
        loader=PackageLoader("verigap.report", "templates"), autoescape=select_autoescape()
    )
    page = env.get_template("pilot.html.j2").render(
        figures=figures,
        table=table,
        runs_dir=html.escape(str(runs_dir)),
        n_runs=sum(len(v) for v in runs.values()),
    )
    (out / "index.html").write_text(page)
    return out / "index.html"
