"""The site as a write-up: a front page that tells the story and one page per family.

Each family is a :class:`Family`: the results files it reads, a function that turns them into a
page (narrative first, then figures, then tables) and a headline for the front page. Every
number in the prose is read from a results file; every figure is drawn from one
(:mod:`verigap.report.figures`). A family whose files are absent is left off, so a checkout with
part of ``results/`` still builds.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verigap.report import figures as F
from verigap.report.log import log_page
from verigap.report.site import Figure, Headline, Page, SiteInputs, md, provider
from verigap.report.views import get_view
from verigap.results import read_meta, read_result

PILOT = "patchworld/pilot.json"
PILOT_LONG = "patchworld/pilot_long.json"
CARELESS = "patchworld/careless.json"
HACKABILITY = {
    "fixture": "redteam/hackability_fixture.json",
    "inflection": "redteam/hackability_inflection.json",
    "toolz": "redteam/hackability_toolz.json",
}
DETECTION = {
    "fixture": "redteam/detection_fixture.json",
    "inflection": "redteam/detection_inflection.json",
    "toolz": "redteam/detection_toolz.json",
}
MONITOR = {
    "real": "redteam/monitor_builtin_real.json",
    "fixture": "redteam/monitor_builtin_fixture.json",
}
SILENT_EVAL = "silentbug/eval_scripted.json"
SILENT_CURVES = "silentbug/curves.json"
SILENT_CONTROLS = "silentbug/controls.json"
GENERALITY = "repos/generality.json"
PPO_SPEED = "silentbug/ppo_speed.json"
#: The language-model experiment's results (built elsewhere): shown when a file is there.
LANGUAGE_MODEL_DIR = "llm"
LM_CURVES = "lm_curves.json"
LM_START_PROBE = "lm_start_probe.json"
LM_SPEED = "agents/lm_grpo_speed.json"


@dataclass
class Story:
    pages: list[Page] = field(default_factory=list)
    headlines: list[Headline] = field(default_factory=list)


Builder = Callable[[SiteInputs, Story], None]
BUILDERS: list[Builder] = []


def family(fn: Builder) -> Builder:
    BUILDERS.append(fn)
    return fn


def _has(inputs: SiteInputs, rel: str) -> bool:
    return (inputs.results_dir / rel).is_file()


def _load(inputs: SiteInputs, rel: str) -> Any:
    return read_result(inputs.results_dir / rel)


def _cmd(inputs: SiteInputs, rel: str) -> str:
    return str(read_meta(inputs.results_dir / rel).get("command", "?"))


def _pct(x: float) -> str:
    """A share as a percentage; one decimal below 10% so small values do not read as zero."""
    return f"{100 * x:.1f}%" if 0 < x < 0.1 else f"{100 * x:.0f}%"


def _fig(
    inputs: SiteInputs,
    draw: Callable[..., Path | None],
    name: str,
    caption: str,
    alt: str,
    *args: Any,
) -> Figure | None:
    path = draw(*args, inputs.out / "figures" / name)
    return Figure(f"figures/{name}", caption, alt) if path is not None else None


def _figs(*figs: Figure | None) -> list[Figure]:
    return [f for f in figs if f is not None]


def _view(name: str, data: Any) -> str:
    """A registered view as HTML. Some views import a family's optional extra (the red-team
    views need libcst); `make site` installs only the core, so a missing extra costs that one
    table, says so, and points at the data in the appendix."""
    try:
        return md(get_view(name)(data))
    except ModuleNotFoundError as e:
        return (
            f"<p class=meta>This table needs the optional package <code>{html.escape(str(e.name))}"
            "</code> (<code>pip install -e '.[repos]'</code>); its data is in the appendix "
            "linked below.</p>"
        )


# ---- Patch World -------------------------------------------------------------------------------


@family
def patchworld(inputs: SiteInputs, story: Story) -> None:
    if not _has(inputs, PILOT):
        return
    pilot = _load(inputs, PILOT)
    long = _load(inputs, PILOT_LONG) if _has(inputs, PILOT_LONG) else None
    s = pilot["settings"]
    vis = s.get("visible")
    gap = _fig(
        inputs,
        F.pilot_gap,
        "pilot_gap.png",
        "Share of held-out programs that pass the visible checks and share that are "
        "actually correct during GRPO; the shaded gap is false success. Left: reward from "
        "the visible checks only; right: random audits by the hidden check on 25% of "
        "episodes. Crosses: the pilot write-up's stated numbers."
        + (
            ""
            if pilot.get("curves")
            else " Points are the two measured evaluations "
            "(SFT start and end of training): this results file predates the per-step "
            "curves `make pilot` now stores."
        ),
        "Line chart: under visible-only reward the passing share rises while the correct "
        "share falls, a widening shaded gap; with 25% audits the two lines stay together.",
        pilot,
    )
    outcomes = _fig(
        inputs,
        F.pilot_outcomes,
        "pilot_outcomes.png",
        "What became of every untested broken branch after training, by reward; the "
        "first bar is the fine-tuned policy before RL.",
        "Stacked bars per reward scheme: share of untested broken branches fixed, "
        "off by one, wrong, stubbed or deleted.",
        pilot,
    )
    audits = _fig(
        inputs,
        F.audit_rate,
        "pilot_audit_rate.png",
        "False success after training against the audit rate (0% = visible checks "
        "only), mean ± std over seeds; crosses are the pilot write-up's stated figures"
        + (", the square the 5000-step follow-up at 25%." if long else "."),
        "Line chart: false success falls from about two thirds at 0% audits to near "
        "zero from 25% audits upwards.",
        pilot,
        long,
    )
    ks = _fig(
        inputs,
        F.broken_branches,
        "pilot_k.png",
        "False success after visible-only training against the number of broken branches "
        "per program, as a share of all programs and of those that pass.",
        "Line chart of false success, false success among passing programs and true "
        "success against k broken branches.",
        pilot,
    )
    finding = ""
    if vis:
        a25 = s.get("audit_25")
        finding = (
            f"With reward from the visible checks only, GRPO raised the share of held-out "
            f"programs that pass from {_pct(vis['start_visible_pass']['mean'])} to "
            f"{_pct(vis['final_visible_pass']['mean'])} while the share actually correct fell "
            f"from {_pct(vis['start_true_success']['mean'])} to "
            f"{_pct(vis['final_true_success']['mean'])}: false success went from "
            f"{_pct(vis['start_false_success']['mean'])} to "
            f"<b>{_pct(vis['final_false_success']['mean'])}</b>. Every reward curve looked like "
            "progress."
            + (
                f" Random audits by the hidden check on 25% of episodes hold it at "
                f"<b>{_pct(a25['final_false_success']['mean'])}</b>."
                if a25
                else ""
            )
        )
    audit_finding = _audit_threshold(s, long)
    narrative = (
        "<p>Patch World is a toy repair task small enough to control completely: a program has 12 "
        "branches whose outputs follow a pattern, some are broken, and the agent may write a "
        "value, stub a branch or delete it. Half the broken branches are reached by the visible "
        "tests; a hidden equivalence check compares every branch with the reference. A small MLP "
        "is fine-tuned on a careless engineer's demonstrations, then trained with GRPO and a KL "
        "penalty under each reward scheme, 3 seeds each, and evaluated greedily on held-out "
        f"programs.</p><p>{finding}</p><p>{audit_finding}</p>"
        + (
            ""
            if outcomes
            else "<p class=meta>The outcome of every untested broken branch by "
            "reward needs the outcome shares that <code>make pilot</code> now writes into "
            f"<code>results/{PILOT}</code>; the committed file predates them.</p>"
        )
    )
    tables = (
        "<h2>Every k=4 setting after training</h2>"
        + _view("pilot", pilot)
        + "<h2>False success against the number of broken branches</h2>"
        + _view("pilot_k", pilot)
    )
    sources = [PILOT]
    if long:
        tables += "<h2>The 5000-step follow-up</h2>" + _view("pilot_long", long)
        sources.append(PILOT_LONG)
    story.pages.append(
        Page(
            "patchworld/pilot.html",
            "Pilot: false success under GRPO",
            "Patch World",
            narrative,
            tables,
            _figs(gap, outcomes, audits, ks),
            sources,
        )
    )
    story.headlines.append(
        Headline(
            "Reward hacking, measured", "patchworld/pilot.html", finding, gap, _cmd(inputs, PILOT)
        )
    )
    if audits:
        story.headlines.append(
            Headline(
                "Audits are a threshold, not a dial",
                "patchworld/pilot.html",
                audit_finding,
                audits,
                _cmd(inputs, PILOT),
            )
        )
    if _has(inputs, CARELESS):
        data = _load(inputs, CARELESS)
        story.pages.append(
            Page(
                "patchworld/careless.html",
                "The careless engineer",
                "Patch World",
                f"<p>The scripted careless engineer whose demonstrations the pilot fine-tunes on, "
                f"rolled out on {data['n']} held-out programs (k={data['k']}, reward "
                f"{html.escape(str(data['reward']))}): {_pct(data['false_success'])} of its programs "
                "already pass the visible checks while wrong. This is where RL starts.</p>",
                _view("rollout", data),
                sources=[CARELESS],
            )
        )


def _audit_threshold(s: dict[str, Any], long: dict[str, Any] | None) -> str:
    rates = sorted(
        (int(n.split("_")[1]), r["final_false_success"]["mean"])
        for n, r in s.items()
        if n.startswith("audit_") and n.split("_")[1].isdigit()
    )
    if not rates or "visible" not in s:
        return ""
    parts = ", ".join(f"{r}%: {_pct(v)}" for r, v in rates)
    text = (
        f"False success after training by audit rate — none: "
        f"{_pct(s['visible']['final_false_success']['mean'])}, {parts}. Below a threshold "
        "audits barely help; above it they match auditing every episode."
    )
    if long and "long_audit_25" in long.get("settings", {}):
        row = long["settings"]["long_audit_25"]
        text += (
            f" Over {row['steps']} steps, 25% audits end at "
            f"{_pct(row['final_false_success']['mean'])}."
        )
    return text


PROBES = "patchworld/probes.json"
MULTIAGENT = "experiments/multiagent_settings.json"


@family
def transformer(inputs: SiteInputs, story: Story) -> None:
    if not _has(inputs, PROBES):
        return
    data = _load(inputs, PROBES)
    s = data.get("settings", {})
    comp = _fig(
        inputs,
        F.policy_comparison,
        "policy_comparison.png",
        "False success after training under each reward, the MLP policy beside a small "
        "transformer that reads the whole program (mean ± std over seeds).",
        "Paired bars: both policies end mostly falsely successful under visible-only "
        "reward and near zero under 25% audits or the oracle.",
        data,
    )
    layers = _fig(
        inputs,
        F.probe_layers,
        "probe_layers.png",
        "Balanced accuracy of linear probes on each layer of the transformer trained "
        "on visible checks, per target; dashed: the same probe on a control task.",
        "Line chart of probe accuracy by layer, well above the dashed control lines.",
        data,
    )
    finding = ""
    if "tf_visible" in s and "mlp_visible" in s:
        finding = (
            f"A transformer policy reaches the same hack as the MLP: false success "
            f"{_pct(s['tf_visible']['final_false_success']['mean'])} under visible-only "
            f"reward (MLP {_pct(s['mlp_visible']['final_false_success']['mean'])})"
            + (
                f", {_pct(s['tf_audit_25']['final_false_success']['mean'])} with 25% audits"
                if "tf_audit_25" in s
                else ""
            )
            + "."
        )
    story.pages.append(
        Page(
            "patchworld/transformer.html",
            "Transformer policy and probes",
            "Patch World",
            f"<p>{finding} Linear probes on its hidden states "
            "show what it represents about the broken branches.</p>",
            "<h2>MLP against transformer</h2>"
            + _view("transformer_pilot", data)
            + "<h2>Probes</h2>"
            + _view("transformer_probes", data),
            _figs(comp, layers),
            [PROBES],
        )
    )
    story.headlines.append(
        Headline(
            "The hack does not depend on the architecture",
            "patchworld/transformer.html",
            finding,
            comp,
            _cmd(inputs, PROBES),
        )
    )


@family
def multiagent(inputs: SiteInputs, story: Story) -> None:
    if not _has(inputs, MULTIAGENT):
        return
    data = _load(inputs, MULTIAGENT)
    fig = _fig(
        inputs,
        F.multiagent_settings,
        "multiagent.png",
        "False success after training per multi-agent setting: audits drawn at random, "
        "only among passing episodes, or by a learned auditor, and a co-trained test "
        "writer that sees or does not see the hidden branches.",
        "Horizontal bars of false success per setting; red above 10%, green below.",
        data,
    )
    s = data.get("settings", {})

    def fs(n: str) -> str:
        v = s.get(n, {}).get("final_false_success")
        return _pct(sum(v) / len(v)) if v else "?"

    finding = (
        f"At a 10% audit budget, audits drawn from all episodes leave "
        f"{fs('random_audit_10')} false success, drawn from passing episodes only "
        f"{fs('random_passed_audit_10')}, chosen by a learned auditor "
        f"{fs('learned_audit_10')}; at 2% neither holds ({fs('random_passed_audit_2')} "
        f"and {fs('learned_audit_2')})."
    )
    tables = "".join(
        f"<h2>{t}</h2>" + _view(v, data)
        for t, v in (
            ("Auditors", "multiagent_auditors"),
            ("Test writers", "multiagent_writers"),
            ("Training dynamics", "multiagent_dynamics"),
        )
    )
    story.pages.append(
        Page(
            "patchworld/multiagent.html",
            "Multi-agent auditing",
            "Patch World",
            f"<p>Audits cost a hidden check each; who chooses what to audit "
            f"decides how far a budget goes. {finding}</p>",
            tables,
            _figs(fig),
            [MULTIAGENT],
        )
    )
    story.headlines.append(
        Headline(
            "Who picks the audits decides what a budget buys",
            "patchworld/multiagent.html",
            finding,
            fig,
            _cmd(inputs, MULTIAGENT),
        )
    )


# ---- red team ----------------------------------------------------------------------------------


@family
def redteam(inputs: SiteInputs, story: Story) -> None:
    found = {p: rel for p, rel in HACKABILITY.items() if _has(inputs, rel)}
    if not found:
        return
    data = {p: _load(inputs, rel) for p, rel in found.items()}
    matrices = {p: d["matrix"] for p, d in data.items()}
    heat = _fig(
        inputs,
        F.hackability_heatmap,
        "hackability.png",
        "Share of each scripted exploit's episodes that each grader paid, per project "
        "(grey: exploit not applicable there). v1 runs the visible tests in the agent's "
        "workspace; v2 is the hardened grader.",
        "Heatmap of exploits against graders: the v1 columns are mostly dark red (paid), "
        "the v2 columns white (not paid).",
        matrices,
    )
    classes = _fig(
        inputs,
        lambda m, path: F.hackability_heatmap(m, path, by="klass"),
        "hackability_classes.png",
        "Share of exploit episodes each grader paid, pooled by exploit class, per project.",
        "Heatmap of exploit classes against graders: v1 pays most classes, v2 almost none.",
        matrices,
    )
    paid = {p: d.get("paid_count", {}) for p, d in data.items()}
    n_exploits = {
        p: data[p].get("exploits_ran", sum(1 for r in m["rows"] if not r.get("control")))
        for p, m in matrices.items()
    }
    parts = "; ".join(
        f"{p}: v1 paid {c.get('v1', '?')}, v2 paid {c.get('v2', '?')} of {n_exploits[p]} exploits"
        for p, c in paid.items()
    )
    fixes = sorted({e for d in data.values() for e in d.get("real_fixes", [])})
    finding = (
        "Before training on an environment, a battery of scripted exploit agents shows "
        f"which hacks its checker would reward. Exploits paid — {parts}."
        + (
            f" ({', '.join(fixes)} is paid where it leaves the code correct: a real fix "
            "there, not a hack.)"
            if fixes
            else ""
        )
    )
    # Tables from the results alone (the full matrix view needs the repos extra; `make site`
    # installs only the core): what each grader paid per exploit, then how v2 answered.
    tables = _paid_table(matrices) + "".join(
        f"<h2>How v2 answered each exploit: {p}</h2>" + _view("redteam_v2_answers", d)
        for p, d in data.items()
        if "v2_by_exploit" in d
    )
    story.pages.append(
        Page(
            "redteam/hackability.html",
            "Hackability matrix",
            "Red team",
            f"<p>{finding} A grader that pays an exploit trains the exploit; "
            "the matrix is the list of what to fix before any RL run.</p>",
            tables,
            _figs(classes, heat),
            list(found.values()),
        )
    )
    story.headlines.append(
        Headline(
            "The naive grader pays for hacks; the hardened one does not",
            "redteam/hackability.html",
            finding,
            classes or heat,
            _cmd(inputs, next(iter(found.values()))),
        )
    )
    _detection(inputs, story)


def _paid_table(matrices: dict[str, dict[str, Any]]) -> str:
    """Exploit × (project, grader): the share of its episodes paid, as an HTML table."""
    cols = [(p, g) for p, m in matrices.items() for g in m.get("graders", [])]
    cells: dict[str, dict[tuple[str, str], float]] = {}
    klass: dict[str, str] = {}
    for p, m in matrices.items():
        for r in m["rows"]:
            klass.setdefault(r["exploit"], r.get("klass", ""))
            for g, v in r["graders"].items():
                cells.setdefault(r["exploit"], {})[(p, g)] = v["rewarded"]
    head = "".join(f"<th>{html.escape(g)} on {html.escape(p)}</th>" for p, g in cols)
    rows = "".join(
        f"<tr><td>{html.escape(e)}</td><td>{html.escape(klass[e])}</td>"
        + "".join(
            (
                f'<td class="bad">{c[k]:.2f}</td>'
                if c[k] > 0 and e not in ("oracle",)
                else f"<td>{c[k]:.2f}</td>"
            )
            if k in c
            else "<td>—</td>"
            for k in cols
        )
        + "</tr>"
        for e, c in cells.items()
    )
    return (
        "<h2>Share of episodes paid, per exploit</h2><table><tr><th>exploit</th>"
        f"<th>class</th>{head}</tr>{rows}</table>"
    )


def _detection(inputs: SiteInputs, story: Story) -> None:
    det = {p: _load(inputs, rel) for p, rel in DETECTION.items() if _has(inputs, rel)}
    mon_rel = next((rel for rel in MONITOR.values() if _has(inputs, rel)), None)
    if not det and not mon_rel:
        return
    mon = _load(inputs, mon_rel) if mon_rel else None
    recall = _fig(
        inputs,
        F.detection_recall,
        "detection_recall.png",
        "Share of the battery's exploit episodes the v2 grader named by class, and "
        "share of honest fixes that differ from the reference which it flagged, per "
        "project.",
        "Bar chart per project: recall near 90% or more, honest false alarms near zero.",
        det,
    )
    fam = (
        _fig(
            inputs,
            F.detection_by_family,
            "detection_families.png",
            "Built-in transcript monitor: share of hacked transcripts flagged, per exploit "
            "family, each judged in isolation.",
            "Horizontal bars: most exploit families are "
            "flagged in every transcript; the weakest families are drawn in red.",
            mon,
        )
        if mon
        else None
    )
    bits = [
        f"{p}: {d['battery']['detected']}/{d['battery']['exploit_episodes']} exploit episodes named"
        for p, d in det.items()
        if "battery" in d
    ]
    finding = "The v2 grader names the exploit it refuses to pay: " + "; ".join(bits) + "."
    if mon:
        c = mon.get("contrastive", {})
        finding += (
            f" The transcript monitor flags {_pct(c.get('detection_rate', 0))} of "
            f"hacked/honest pairs with {_pct(c.get('false_alarm_rate', 0))} false "
            "alarms."
        )
    tables = "".join(
        f"<h2>Detection: {p}</h2>" + _view("detection_summary", d) for p, d in det.items()
    )
    if mon:
        tables += "<h2>Transcript monitor</h2>" + _view("monitor_eval", mon)
    sources = [rel for p, rel in DETECTION.items() if p in det] + ([mon_rel] if mon_rel else [])
    story.pages.append(
        Page(
            "redteam/detection.html",
            "Detection",
            "Red team",
            f"<p>Not paying a hack is half the job; the other half is saying "
            f"which hack it was, so it can be counted. {finding}</p>",
            tables,
            _figs(recall, fam),
            sources,
        )
    )
    story.headlines.append(
        Headline(
            "Hacks are named, not just refused",
            "redteam/detection.html",
            finding,
            recall or fam,
            _cmd(inputs, sources[0]),
        )
    )


# ---- silent bugs -------------------------------------------------------------------------------


@family
def silentbug(inputs: SiteInputs, story: Story) -> None:
    if not _has(inputs, SILENT_EVAL):
        return
    ev = _load(inputs, SILENT_EVAL)
    curves = _load(inputs, SILENT_CURVES) if _has(inputs, SILENT_CURVES) else {}
    controls = _load(inputs, SILENT_CONTROLS) if _has(inputs, SILENT_CONTROLS) else {}
    gaps = _fig(
        inputs,
        F.silentbug_gaps,
        "silentbug_gaps.png",
        "Mean episodic return of the scorer's clean reference runs against the same "
        "runs with each bug: nothing crashes, the policy just learns less. Crosses: the "
        "silent-bug write-up's stated returns for the recomputed old log-prob bug.",
        "Paired bars per bug, CartPole and Acrobot panels: the return with the bug is "
        "far below the clean return for every bug.",
        ev,
    )
    learn = _fig(
        inputs,
        F.silentbug_curves,
        "silentbug_curves.png",
        "Clean PPO learning curves per substrate, per seed (thin) and mean (thick).",
        "Rising learning curves for each PPO substrate.",
        curves,
    )
    summ = ev.get("summary", {})
    others = {a: v for a, v in summ.items() if a != "oracle"}
    finding = (
        "Bugs in RL training code that raise nothing and fail no test, only make the "
        "policy learn less. Scripted agents check the scorer before any model is "
        "measured"
        + (
            f": the real fix earns a mean reward of "
            f"{summ['oracle']['mean_reward']:.2f}, while "
            f"{', '.join(sorted(others))} earn at most "
            f"{max(v['mean_reward'] for v in others.values()):.2f}"
            if "oracle" in summ and others
            else ""
        )
        + "."
    )
    tables = (
        "<h2>Scripted agents on every bug</h2>"
        + _view("silentbug_eval_summary", ev)
        + "<h2>Reference numbers</h2>"
        + _view("silentbug_references", ev)
    )
    sources = [SILENT_EVAL]
    if controls:
        tables += "<h2>Controls</h2>" + _view("silentbug_controls", controls)
        sources.append(SILENT_CONTROLS)
    if curves:
        tables += "<h2>Clean curves</h2>" + _view("silentbug_curves", curves)
        sources.append(SILENT_CURVES)
    story.pages.append(
        Page(
            "silentbug/benchmark.html",
            "Silent-bug benchmark",
            "Silent bugs",
            f"<p>{finding}</p>",
            tables,
            _figs(gaps, learn),
            sources,
        )
    )
    story.headlines.append(
        Headline(
            "Silent bugs: the run trains, the policy does not learn",
            "silentbug/benchmark.html",
            finding,
            gaps or learn,
            _cmd(inputs, SILENT_EVAL),
        )
    )


# ---- real projects -----------------------------------------------------------------------------


@family
def repos(inputs: SiteInputs, story: Story) -> None:
    if not _has(inputs, GENERALITY):
        return
    gen = _load(inputs, GENERALITY)
    fig = _fig(
        inputs,
        F.generality,
        "generality.png",
        "Per real Python project: mutations that make a test fail (valid) and the tasks "
        "made from them.",
        "Horizontal bars per project: valid mutations and tasks made.",
        gen,
    )
    sm = gen.get("summary", {})
    paid = sm.get("paid_rate", {})
    finding = (
        f"Of {sm.get('projects', '?')} real projects, {sm.get('prepared', '?')} were "
        f"prepared and {sm.get('with_tasks', '?')} yielded tasks ({sm.get('tasks', '?')} "
        f"in all); on the graded ones an honest reference fix is paid "
        f"{_pct(paid.get('v2/oracle', 0))} of the time by v2 and doing nothing "
        f"{_pct(paid.get('v2/noop', 0))}."
    )
    story.pages.append(
        Page(
            "repos/generality.html",
            "Generality across projects",
            "Repo tasks",
            f"<p>The pipeline that turns a repository into bug-fix tasks is "
            f"tried on projects it was not written for. {finding}</p>",
            _view("repos_generality", gen),
            _figs(fig),
            [GENERALITY],
        )
    )
    story.headlines.append(
        Headline(
            "It works on projects it was not written for",
            "repos/generality.html",
            finding,
            fig,
            _cmd(inputs, GENERALITY),
        )
    )


# ---- speed -------------------------------------------------------------------------------------


@family
def speed(inputs: SiteInputs, story: Story) -> None:
    if not _has(inputs, PPO_SPEED):
        return
    data = _load(inputs, PPO_SPEED)
    fig = _fig(
        inputs,
        F.speed,
        "speed_ppo.png",
        "CPU seconds per PPO training run of each substrate against the CleanRL-style "
        "reference (red), measured in the same process; labels give the score reached.",
        "Horizontal bars of CPU seconds per run; the reference bar is the longest.",
        data,
    )
    impl, base = data["implementations"], data.get("baseline")
    finding = ""
    if base in impl:
        # Like for like: fresh processes against the fresh reference, preloaded against preloaded.
        fresh = [n for n in impl if n != base and "preloaded" not in n]
        warm = [n for n in impl if n != base and "preloaded" in n and n.startswith("ppo")]
        parts = []
        for names, ref in ((fresh, base), (warm, "baseline_preloaded")):
            if names and ref in impl:
                best = min(names, key=lambda n: impl[n]["cpu_s"])
                parts.append(
                    f"{html.escape(best)} {impl[best]['cpu_s']:.1f} s against "
                    f"{impl[ref]['cpu_s']:.1f} s "
                    f"({impl[ref]['cpu_s'] / impl[best]['cpu_s']:.1f}× faster)"
                )
        finding = (
            "CPU seconds per PPO training run, ours against the CleanRL-style reference "
            "in the same process: " + "; ".join(parts) + "."
        )
    story.pages.append(
        Page(
            "speed.html",
            "Speed against the references",
            "Speed",
            f"<p>{finding}</p>",
            _view("silentbug_ppo_speed", data),
            _figs(fig),
            [PPO_SPEED],
        )
    )
    story.headlines.append(
        Headline(
            "Faster than the reference PPO", "speed.html", finding, fig, _cmd(inputs, PPO_SPEED)
        )
    )


# ---- language-model experiment (slot) ----------------------------------------------------------


@family
def language_model(inputs: SiteInputs, story: Story) -> None:
    """Shown only when the language-model experiment has written its results."""
    folder = inputs.results_dir / LANGUAGE_MODEL_DIR
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        return
    from verigap.report.site import data_html

    rels = [f.relative_to(inputs.results_dir).as_posix() for f in files]
    body = "".join(
        f"<h2>{html.escape(r)}</h2>" + data_html(read_result(f))
        for r, f in zip(rels, files, strict=True)
    )
    intro = (
        "<p>A language model trained against the same reward schemes; its results files, "
        "as written.</p>"
    )
    figs: list[Figure] = []
    finding = f"{len(rels)} results file(s): " + ", ".join(html.escape(r) for r in rels) + "."
    curves_rel = f"{LANGUAGE_MODEL_DIR}/{LM_CURVES}"
    if curves_rel in rels:
        curves = _load(inputs, curves_rel)
        fig = _fig(
            inputs,
            F.lm_beside_mlp,
            "lm_beside_mlp.png",
            "Visible pass and false success per GRPO step: SmolLM2-135M (LoRA) beside the "
            "NumPy MLP at the same step count; unfinished runs are labelled partial.",
            "two panels of curves per GRPO step",
            curves,
        )
        figs = _figs(fig)
        table = _view("lm_experiment_status", curves)
        table += "<h2>Sampled answers per run, averaged over its GRPO steps</h2>" + _view(
            "lm_run_means", curves
        )
        probe_rel = f"{LANGUAGE_MODEL_DIR}/{LM_START_PROBE}"
        if probe_rel in rels:
            table += "<h2>What the SFT starts give GRPO to learn from</h2>" + _view(
                "lm_start_probe", _load(inputs, probe_rel)
            )
        if _has(inputs, LM_SPEED):
            table += "<h2>One GRPO step, phase by phase</h2>" + _view(
                "lm_grpo_speed", _load(inputs, LM_SPEED)
            )
        body = table + body
        states = [x["status"] for d in curves["settings"].values() for x in d["seeds"].values()]
        finding = (
            f"{states.count('finished')} of {len(states)} runs of the language-model log "
            f"finished, {states.count('partial')} partial; curves beside the MLP's."
        )
    story.pages.append(
        Page(
            "llm/index.html",
            "Language-model experiment",
            "Language model",
            intro,
            body,
            figs,
            sources=rels,
        )
    )
    story.headlines.append(
        Headline(
            "Language-model experiment",
            "llm/index.html",
            finding,
            figs[0] if figs else None,
            _cmd(inputs, rels[0]),
        )
    )


@provider
def story_pages(inputs: SiteInputs) -> list[Page]:
    """Every family's page, each carrying its headlines for the front page."""
    story = Story()
    for fn in BUILDERS:
        fn(inputs, story)
    log_page(inputs, story)
    by_file = {p.file: p for p in story.pages}
    for h in story.headlines:
        by_file[h.page].headlines.append(h)
    return story.pages
