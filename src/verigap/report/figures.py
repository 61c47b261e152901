"""The site's figures: one style, drawn from results files only.

Every function takes a results file's data and a path, draws one figure and returns the path,
or ``None`` when the data it needs is not in the file (the page then says what is missing
instead of showing an empty chart). Reference values quoted from the write-ups in the product
brief are drawn beside ours as crosses and labelled as such, never mixed into our series.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

#: One palette for the whole site: what passed, what was correct, the gap, a reference.
PASS, CORRECT, GAP, REF, NEUTRAL, ACCENT = (
    "#264653",
    "#2a9d8f",
    "#e63946",
    "#d62828",
    "#8d99ae",
    "#e9c46a",
)
OUTCOMES = ("fixed", "off_by_one", "wrong", "stub", "delete")
OUTCOME_COLORS = ("#2a9d8f", "#e9c46a", "#f4a261", "#8d99ae", "#e63946")
VERDICT_COLORS = {
    "refuted": "#e63946",
    "supported": "#2a9d8f",
    "inconclusive": "#8d99ae",
    "sanity check": "#e9c46a",
}

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "font.family": "DejaVu Sans",
}

#: The Patch World pilot write-up's stated numbers (shared/seeds), drawn as reference crosses.
PILOT_WRITEUP = {
    "visible_pass": 0.58,
    "start_true_success": 0.31,
    "true_success": 0.02,
    "false_success_visible": 0.56,
    "false_success_audit_100": 0.04,
}


@contextmanager
def styled(width: float = 6.4, height: float = 3.8, ncols: int = 1) -> Iterator[tuple[Any, Any]]:
    """A figure in the site's style; the caller draws into ``axes``."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, ncols, figsize=(width, height))
        try:
            yield fig, axes
        finally:
            plt.close(fig)


def save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    return path


def _pct(ax: Any, axis: str = "y") -> None:
    fmt = matplotlib.ticker.PercentFormatter(1.0, decimals=0)
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(fmt)


# ---- Patch World pilot ------------------------------------------------------------------------


def _mean(row: dict[str, Any], key: str) -> float:
    return float(row[key]["mean"])


def pilot_gap(
    pilot: dict[str, Any], path: Path, settings: tuple[str, ...] = ("visible", "audit_25")
) -> Path | None:
    """Pass against correct during GRPO, the gap shaded, one panel per reward. Uses the compact
    per-step curves when the file has them, else the two measured points (SFT start, end)."""
    names = [n for n in settings if n in pilot.get("settings", {})]
    if not names:
        return None
    curves = pilot.get("curves", {})
    with styled(8.4, 3.6, len(names)) as (fig, axes):
        axes = np.atleast_1d(axes)
        for ax, name in zip(axes, names, strict=True):
            row, c = pilot["settings"][name], curves.get(name) or {}
            if c.get("step"):
                x = np.array(c["step"])
                vis, true = np.array(c["visible_pass"]), np.array(c["true_success"])
                marker = None
            else:
                x = np.array([0, row["steps"]])
                vis = np.array([_mean(row, "start_visible_pass"), _mean(row, "final_visible_pass")])
                true = np.array(
                    [_mean(row, "start_true_success"), _mean(row, "final_true_success")]
                )
                marker = "o"
            ax.plot(x, vis, color=PASS, marker=marker, label="passes the visible checks")
            ax.plot(x, true, color=CORRECT, marker=marker, label="actually correct")
            ax.fill_between(
                x,
                true,
                vis,
                where=vis >= true,
                color=GAP,
                alpha=0.25,
                label="false success (the gap)",
            )
            if name == "visible":
                ax.plot(
                    [x[-1]],
                    [PILOT_WRITEUP["visible_pass"]],
                    "x",
                    color=REF,
                    ms=8,
                    mew=2,
                    label="pilot write-up (stated)",
                )
                ax.plot([x[-1]], [PILOT_WRITEUP["true_success"]], "x", color=REF, ms=8, mew=2)
                ax.plot([0], [PILOT_WRITEUP["start_true_success"]], "x", color=REF, ms=8, mew=2)
            label = (
                "visible checks only"
                if name == "visible"
                else name.replace("audit_", "random audits on ")
                + ("% of episodes" if "audit" in name else "")
            )
            ax.set(title=f"Reward: {label}", xlabel="GRPO step", ylim=(0, 1))
            _pct(ax)
        axes[0].set_ylabel("share of held-out programs")
        axes[0].legend(loc="upper left")
        return save(fig, path)


def pilot_outcomes(pilot: dict[str, Any], path: Path) -> Path | None:
    """What became of every untested broken branch, per reward (k=4); needs ``outcomes``."""
    outcomes = pilot.get("outcomes", {})
    names = [n for n in pilot.get("order", []) if n in outcomes and pilot["settings"][n]["k"] == 4]
    if not names:
        return None
    bars = [("start (SFT)", outcomes[names[0]]["start"])] + [
        (n, outcomes[n]["final"]) for n in names
    ]
    with styled(7.6, 3.8) as (fig, ax):
        left = np.zeros(len(bars))
        for o, color in zip(OUTCOMES, OUTCOME_COLORS, strict=True):
            vals = np.array([b[1].get(f"untested/{o}", 0.0) for b in bars])
            ax.barh([b[0] for b in bars], vals, left=left, color=color, label=o)
            left += vals
        ax.invert_yaxis()
        ax.set(
            xlabel="share of untested broken branches (held-out programs)",
            xlim=(0, 1),
            title="Outcome of every untested broken branch, by reward (k=4)",
        )
        _pct(ax, "x")
        ax.legend(ncol=5, loc="lower center", bbox_to_anchor=(0.5, -0.38))
        return save(fig, path)


def audit_rate(pilot: dict[str, Any], long: dict[str, Any] | None, path: Path) -> Path | None:
    """False success after training against the audit rate (0% = visible checks only)."""
    s = pilot.get("settings", {})
    pts = [(0.0, s["visible"])] if "visible" in s else []
    pts += [
        (int(m.group(1)), row) for n, row in s.items() if (m := re.fullmatch(r"audit_(\d+)", n))
    ]
    if len(pts) < 2:
        return None
    pts.sort(key=lambda p: p[0])
    x = np.array([p[0] for p in pts])
    y = np.array([_mean(p[1], "final_false_success") for p in pts])
    e = np.array([p[1]["final_false_success"]["std"] for p in pts])
    with styled(6.4, 3.8) as (fig, ax):
        ax.errorbar(
            x,
            y,
            yerr=e,
            marker="o",
            capsize=3,
            color=PASS,
            label=f"verigap, {pts[0][1]['steps']} steps (mean ± std, "
            f"{len(pts[0][1]['seeds'])} seeds)",
        )
        if long:
            for n, row in long.get("settings", {}).items():
                if n == "long_audit_25":
                    ax.plot(
                        [25],
                        [_mean(row, "final_false_success")],
                        "s",
                        color=ACCENT,
                        ms=8,
                        label=f"25% audits after {row['steps']} steps",
                    )
        ax.plot(
            [0, 100],
            [PILOT_WRITEUP["false_success_visible"], PILOT_WRITEUP["false_success_audit_100"]],
            "x",
            color=REF,
            ms=9,
            mew=2,
            ls="none",
            label="pilot write-up (stated)",
        )
        ax.set_xticks([0, 10, 25, 50, 100], ["none", "10", "25", "50", "100"])
        ax.set(
            xlabel="audit rate (% of episodes that also get the hidden check)",
            ylabel="false success after training",
            ylim=(0, 1),
            title="Audits act like a threshold",
        )
        _pct(ax)
        ax.legend()
        return save(fig, path)


def broken_branches(pilot: dict[str, Any], path: Path) -> Path | None:
    """False success after visible-only training against the number of broken branches k."""
    s = pilot.get("settings", {})
    ks = sorted(
        (row["k"], row)
        for n, row in s.items()
        if n == "visible" or re.fullmatch(r"visible_k\d+", n)
    )
    if len(ks) < 2:
        return None
    x = [k for k, _ in ks]
    with styled(6.4, 3.8) as (fig, ax):
        for key, color, marker, label in (
            ("final_false_success", GAP, "o", "false success (share of all programs)"),
            ("final_fs_given_pass", PASS, "s", "false success among programs that pass"),
            ("final_true_success", CORRECT, "^", "actually correct"),
        ):
            ax.errorbar(
                x,
                [_mean(r, key) for _, r in ks],
                yerr=[r[key]["std"] for _, r in ks],
                marker=marker,
                capsize=3,
                color=color,
                label=label,
            )
        ax.set(
            xlabel="broken branches per program (k)",
            ylabel="after training (held-out)",
            ylim=(0, 1.05),
            xticks=x,
            title="More broken branches, more false success",
        )
        _pct(ax)
        ax.legend(loc="center right")
        return save(fig, path)


# ---- red team ------------------------------------------------------------------------------------


def hackability_heatmap(
    matrices: dict[str, dict[str, Any]], path: Path, by: str = "exploit"
) -> Path | None:
    """Share of exploit episodes a grader paid: rows are exploits (``by="exploit"``) or exploit
    classes (``by="klass"``, episodes pooled), columns (project, grader)."""
    cols = [(proj, g) for proj, m in matrices.items() for g in m.get("graders", [])]
    if not cols:
        return None
    exploits = list(
        dict.fromkeys(r[by] for m in matrices.values() for r in m["rows"] if not r.get("control"))
    )
    paid = np.zeros((len(exploits), len(cols)))
    runs = np.zeros((len(exploits), len(cols)))
    for j, (proj, g) in enumerate(cols):
        for r in matrices[proj]["rows"]:
            if r[by] in exploits and g in r["graders"] and not r.get("control"):
                n = r.get("n", 1) or 1
                paid[exploits.index(r[by]), j] += r["graders"][g]["rewarded"] * n
                runs[exploits.index(r[by]), j] += n
    grid = np.divide(paid, runs, out=np.full_like(paid, np.nan), where=runs > 0)
    with styled(2.4 + 0.75 * len(cols), 1.4 + 0.2 * len(exploits)) as (fig, ax):
        cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#eeeeee")
        im = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap=cmap, vmin=0, vmax=1)
        ax.set_xticks(range(len(cols)), [f"{g}\n{p}" for p, g in cols], fontsize=8)
        ax.set_yticks(range(len(exploits)), exploits, fontsize=7)
        ax.grid(False)
        ax.set_title(
            "Share of exploit episodes the grader paid"
            + (", by exploit class" if by == "klass" else "")
        )
        fig.colorbar(
            im,
            ax=ax,
            fraction=0.05,
            pad=0.02,
            format=matplotlib.ticker.PercentFormatter(1.0, decimals=0),
        ).set_label("paid (grey: not run)")
        return save(fig, path)


def detection_by_family(monitor: dict[str, Any], path: Path) -> Path | None:
    """Detection rate of the built-in monitor per exploit family, on isolated transcripts."""
    fams = monitor.get("isolated", {}).get("by_family", {})
    if not fams:
        return None
    names = sorted(fams, key=lambda f: fams[f]["detected"] / max(1, fams[f]["n"]))
    rates = [fams[f]["detected"] / max(1, fams[f]["n"]) for f in names]
    with styled(6.4, 0.8 + 0.28 * len(names)) as (fig, ax):
        ax.barh(names, rates, color=[GAP if r < 0.5 else CORRECT for r in rates])
        for i, f in enumerate(names):
            ax.text(
                min(rates[i], 0.98) + 0.01,
                i,
                f"{fams[f]['detected']}/{fams[f]['n']}",
                va="center",
                fontsize=8,
            )
        ax.set(
            xlim=(0, 1.1),
            xlabel="share of hacked transcripts the monitor flagged",
            title="Monitor detection by exploit family",
        )
        _pct(ax, "x")
        return save(fig, path)


def detection_recall(detections: dict[str, dict[str, Any]], path: Path) -> Path | None:
    """Battery recall and honest false alarms of the v2 grader's detectors, per project."""
    rows = [(p, d) for p, d in detections.items() if "battery" in d]
    if not rows:
        return None
    x = np.arange(len(rows))
    recall = [d["battery"]["recall"] for _, d in rows]
    alarms = [d["honest"].get("false_alarm_rate_differing") or 0.0 for _, d in rows]
    with styled(6.0, 3.4) as (fig, ax):
        ax.bar(x - 0.2, recall, 0.4, color=CORRECT, label="exploit episodes named (recall)")
        ax.bar(x + 0.2, alarms, 0.4, color=GAP, label="honest differing fixes flagged")
        ax.set_xticks(x, [p for p, _ in rows])
        ax.set(ylim=(0, 1.05), ylabel="share of episodes", title="v2 detectors, per project")
        _pct(ax)
        ax.legend(loc="center right")
        return save(fig, path)


# ---- silent bugs -----------------------------------------------------------------------------


def silentbug_curves(curves: dict[str, Any], path: Path) -> Path | None:
    """Clean PPO learning curves per substrate (mean and per-seed), the yardstick a broken run
    is judged against."""
    rows = curves.get("rows", [])
    if not rows:
        return None
    subs = list(dict.fromkeys(r["substrate"] for r in rows))
    colors = (PASS, CORRECT, ACCENT, GAP, NEUTRAL)
    with styled(6.4, 3.8) as (fig, ax):
        for sub, color in zip(subs, colors, strict=False):
            cs = np.array([r["curve"] for r in rows if r["substrate"] == sub])
            x = np.arange(1, cs.shape[1] + 1)
            for c in cs:
                ax.plot(x, c, color=color, alpha=0.25, lw=1)
            ax.plot(x, cs.mean(0), color=color, lw=2.2, label=f"{sub} (mean of {len(cs)} seeds)")
        ax.set(
            xlabel=f"training progress (bin of {len(x)} equal parts of the run)",
            ylabel="mean episodic return",
            title="Clean PPO: what learning looks like",
        )
        ax.set_xticks(x)
        ax.legend()
        return save(fig, path)


#: The silent-bug write-up's stated returns for the recomputed old log-prob bug (CleanRL PPO,
#: CartPole-v1, 40k timesteps, 3 seeds), drawn beside our scorer's references for that bug.
SILENTBUG_WRITEUP = {"bug": "single_recomputed_old_logprob", "clean": 175.5, "broken": 22.3}


def silentbug_gaps(ev: dict[str, Any], path: Path) -> Path | None:
    """Clean against broken return per bug, as the scorer's references measured them: the gap
    that makes a bug silent (nothing fails) but measurable. One panel per environment."""
    refs: dict[str, dict[str, float]] = {}
    for e in ev.get("per_episode", []):
        r = e.get("returns") or {}
        if r.get("clean") is not None and r.get("broken") is not None:
            refs.setdefault(e["bug"], r)
    if not refs:
        return None
    groups = [
        (env, sorted(b for b in refs if (b.startswith("acrobot_")) == (env == "Acrobot")))
        for env in ("CartPole", "Acrobot")
    ]
    groups = [(env, bugs) for env, bugs in groups if bugs]
    heights = [len(b) for _, b in groups]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            len(groups),
            1,
            figsize=(8.6, 1.2 + 0.3 * sum(heights)),
            gridspec_kw={"height_ratios": heights},
            squeeze=False,
        )
        try:
            for ax, (env, bugs) in zip(axes[:, 0], groups, strict=True):
                y = np.arange(len(bugs))
                ax.barh(
                    y - 0.2, [refs[b]["clean"] for b in bugs], 0.4, color=CORRECT, label="clean"
                )
                ax.barh(
                    y + 0.2, [refs[b]["broken"] for b in bugs], 0.4, color=GAP, label="with the bug"
                )
                w = SILENTBUG_WRITEUP
                if w["bug"] in bugs:
                    k = bugs.index(w["bug"])
                    ax.plot(
                        [w["clean"], w["broken"]],
                        [k - 0.2, k + 0.2],
                        "x",
                        color="black",
                        ms=8,
                        mew=2,
                        ls="none",
                        label="silent-bug write-up (stated)",
                    )
                ax.set_yticks(y, bugs, fontsize=8)
                ax.invert_yaxis()
                ax.axvline(0, color="black", lw=0.8)
                ax.set(xlabel=f"{env}: mean episodic return (scorer's reference runs)")
            axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
            axes[0, 0].set_title("Clean against broken, per bug")
            return save(fig, path)
        finally:
            plt.close(fig)


# ---- repos ---------------------------------------------------------------------------------------


def generality(gen: dict[str, Any], path: Path) -> Path | None:
    """Per project: valid mutations and tasks made, with why a project made none."""
    projects = [p for p in gen.get("projects", []) if p.get("prepared")]
    if not projects:
        return None
    names = [p["spec"] for p in projects]
    y = np.arange(len(names))
    with styled(6.8, 1.0 + 0.34 * len(names)) as (fig, ax):
        ax.barh(
            y,
            [p.get("valid", 0) for p in projects],
            color=NEUTRAL,
            label="valid mutations (a test fails)",
        )
        ax.barh(y, [p.get("tasks", 0) for p in projects], color=PASS, label="tasks made")
        ax.set_yticks(y, names, fontsize=8)
        ax.invert_yaxis()
        ax.set(xlabel="count", title="Real projects turned into bug-fix tasks")
        ax.legend(loc="lower right")
        return save(fig, path)


# ---- speed ---------------------------------------------------------------------------------------


def speed(ppo: dict[str, Any], path: Path) -> Path | None:
    """CPU seconds per PPO run, ours against the CleanRL-style reference, same process."""
    impl = ppo.get("implementations", {})
    if not impl:
        return None
    names = sorted(impl, key=lambda n: impl[n]["cpu_s"], reverse=True)
    base = ppo.get("baseline")
    with styled(6.4, 0.9 + 0.36 * len(names)) as (fig, ax):
        vals = [impl[n]["cpu_s"] for n in names]
        ax.barh(names, vals, color=[REF if n == base else PASS for n in names])
        for i, n in enumerate(names):
            ax.text(
                vals[i],
                i,
                f" {vals[i]:.1f} s, score {impl[n].get('score', 0):.0f}",
                va="center",
                fontsize=8,
            )
        ax.set(
            xlabel="CPU seconds per training run (lower is faster)",
            xlim=(0, max(vals) * 1.45),
            title="PPO substrates against the reference",
        )
        return save(fig, path)


# ---- experiment log ----------------------------------------------------------------------------


def verdict_counts(counts: dict[str, dict[str, int]], path: Path) -> Path | None:
    """Stacked verdict counts per registry, refuted first."""
    if not counts:
        return None
    kinds = [k for k in VERDICT_COLORS if any(c.get(k) for c in counts.values())]
    names = list(counts)
    with styled(6.4, 1.3 + 0.45 * len(names)) as (fig, ax):
        left = np.zeros(len(names))
        for k in kinds:
            vals = np.array([counts[n].get(k, 0) for n in names], dtype=float)
            ax.barh(names, vals, left=left, color=VERDICT_COLORS[k], label=k)
            for i, v in enumerate(vals):
                if v:
                    ax.text(
                        left[i] + v / 2,
                        i,
                        f"{int(v)}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white",
                    )
            left += vals
        ax.invert_yaxis()
        ax.set(
            xlabel="pre-registered predictions",
            title="Verdicts, computed from the criteria",
            xlim=(0, left.max() * 1.3),
        )
        ax.legend(loc="lower right")
        return save(fig, path)


# ---- Patch World variants ----------------------------------------------------------------------


def policy_comparison(probes: dict[str, Any], path: Path) -> Path | None:
    """Final false success per reward, the MLP policy beside the transformer."""
    s = probes.get("settings", {})
    rewards = [r for r in ("visible", "audit_25", "oracle") if f"mlp_{r}" in s or f"tf_{r}" in s]
    if not rewards:
        return None
    x = np.arange(len(rewards))
    with styled(6.0, 3.6) as (fig, ax):
        for off, (prefix, label, color) in zip(
            (-0.2, 0.2), (("mlp", "MLP", PASS), ("tf", "transformer", ACCENT)), strict=True
        ):
            rows = [s.get(f"{prefix}_{r}") for r in rewards]
            ax.bar(
                x + off,
                [r["final_false_success"]["mean"] if r else 0 for r in rows],
                0.4,
                yerr=[r["final_false_success"]["std"] if r else 0 for r in rows],
                capsize=3,
                color=color,
                label=label,
            )
        ax.set_xticks(x, [r.replace("_", " ") for r in rewards])
        ax.set(
            ylim=(0, 1),
            ylabel="false success after training",
            xlabel="reward",
            title="The hack does not depend on the policy's architecture",
        )
        _pct(ax)
        ax.legend()
        return save(fig, path)


def probe_layers(probes: dict[str, Any], path: Path) -> Path | None:
    """Balanced accuracy of linear probes per layer of the trained transformer, per target,
    with the control task drawn dashed."""
    final = probes.get("probes", {}).get("final", {})
    targets = [t for t, v in final.items() if v.get("by_layer", {}).get("bacc")]
    if not targets:
        return None
    colors = (GAP, PASS, CORRECT, ACCENT)
    with styled(6.0, 3.6) as (fig, ax):
        for t, color in zip(targets, colors, strict=False):
            layers = final[t]["by_layer"]
            x = np.arange(len(layers["bacc"]))
            ax.plot(x, layers["bacc"], marker="o", color=color, label=f"{t}: probe")
            if layers.get("control"):
                ax.plot(
                    x,
                    layers["control"],
                    ls="--",
                    color=color,
                    alpha=0.6,
                    label=f"{t}: control task",
                )
        ax.axhline(0.5, color=NEUTRAL, lw=1)
        ax.set_xticks(x)
        ax.set(
            ylim=(0.4, 1.02),
            xlabel="transformer layer",
            ylabel="balanced accuracy",
            title="What the trained transformer represents",
        )
        ax.legend(fontsize=8, ncol=2)
        return save(fig, path)


def multiagent_settings(ma: dict[str, Any], path: Path) -> Path | None:
    """Final false success per multi-agent setting (audit schedules, auditors, test writers)."""
    s = ma.get("settings", {})
    names = [n for n in ma.get("order", s) if s.get(n, {}).get("final_false_success")]
    if not names:
        return None
    vals = [np.asarray(s[n]["final_false_success"], dtype=float) for n in names]
    with styled(6.8, 0.9 + 0.32 * len(names)) as (fig, ax):
        ax.barh(
            names,
            [v.mean() for v in vals],
            xerr=[v.std() for v in vals],
            capsize=3,
            color=[GAP if v.mean() > 0.1 else CORRECT for v in vals],
        )
        ax.invert_yaxis()
        ax.set(
            xlim=(0, 1),
            xlabel="false success after training (mean ± std over seeds)",
            title="Who audits, and what they see",
        )
        _pct(ax, "x")
        return save(fig, path)


# ---- language model beside the MLP ------------------------------------------------------------


def _seed_mean(seeds: list[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Steps every seed with a curve has logged, and the seed-mean of ``key`` at each."""
    curves = [{r["step"]: r[key] for r in s["curve"] if key in r} for s in seeds if s["curve"]]
    steps = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
    return np.array(steps), np.array([np.mean([c[x] for c in curves]) for x in steps])


def lm_beside_mlp(
    curves: dict[str, Any],
    path: Path,
    lm: tuple[str, ...] = ("lm_visible", "lm_audit_25", "lm_oracle"),
    mlp: str = "mlp_visible_50",
) -> Path | None:
    """Visible pass and false success per GRPO step: the language model's settings (left; the
    sampled completions of each step) beside the NumPy MLP at the same step count (right; its
    monitoring evaluations). Partial runs are drawn as far as they went, and labelled."""
    s = curves.get("settings", {})
    names = [n for n in lm if n in s and any(x["curve"] for x in s[n]["seeds"].values())]
    if not names and mlp not in s:
        return None
    colors = {"lm_visible": GAP, "lm_audit_25": CORRECT, "lm_oracle": NEUTRAL}
    with styled(9.0, 3.6, 2) as (fig, axes):
        left, right = axes
        for n in names:
            seeds = list(s[n]["seeds"].values())
            done = sum(x["status"] == "finished" for x in seeds)
            tag = "" if done == len(seeds) else f" (partial: {done}/{len(seeds)} seeds finished)"
            x, fs = _seed_mean(seeds, "false_success")
            _, vis = _seed_mean(seeds, "visible_pass")
            c = colors.get(n, ACCENT)
            left.plot(x, vis, color=c, ls="--", marker=".", label=f"{n}: visible pass{tag}")
            left.plot(x, fs, color=c, marker=".", label=f"{n}: false success")
        planned = max((x["steps"] for n in names for x in s[n]["seeds"].values()), default=1)
        left.set(
            title="Language model (LoRA GRPO, per-step samples)",
            xlabel="GRPO step",
            ylim=(0, 1),
            xlim=(0, planned),
            ylabel="share of episodes",
        )
        if not names:
            left.text(
                0.5, 0.5, "no language-model step logged yet", ha="center", transform=left.transAxes
            )
        if mlp in s:
            seeds = list(s[mlp]["seeds"].values())
            x, fs = _seed_mean(seeds, "false_success")
            _, vis = _seed_mean(seeds, "visible_pass")
            right.plot(x, vis, color=PASS, ls="--", marker="o", label="visible pass")
            right.plot(x, fs, color=GAP, marker="o", label="false success")
        right.set(title="NumPy MLP, same step count (held-out)", xlabel="GRPO step", ylim=(0, 1))
        for ax in axes:
            _pct(ax)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper left", fontsize=7)
        return save(fig, path)
