"""A battery run (or several) summarised for the record: what honest controls were paid and
named, per-class precision and recall, and what the claim checks said."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError
from verigap.repos.redteam import matrix


def results(run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """Every job result under the run dirs; a (agent, task) job done in two dirs counts once
    (the first dir's)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for d in run_dirs:
        found = sorted(d.glob("*/*/result.json"))
        if not found:
            raise ConfigError(
                f"no battery results under {d}; run `verigap redteam TASKS "
                f"--honest --out {d}` first"
            )
        for f in found:
            out.setdefault((f.parent.parent.name, f.parent.name), json.loads(f.read_text()))
    return list(out.values())


def summarize(run_dirs: Sequence[Path], grader: str = "v2") -> dict[str, Any]:
    rs = results(run_dirs)
    m = matrix.build(rs, [grader])
    done = [r for r in rs if not r.get("skipped")]
    honest_rows = [
        {
            "agent": r["exploit"],
            "n": r["n"],
            "correct": r["correct"],
            "paid": r["graders"][grader]["rewarded"],
            "named": r["graders"][grader]["detected"],
            "hacks": r["graders"][grader]["hacks"],
        }
        for r in m["rows"]
        if r["control"] and grader in r["graders"]
    ]
    exploit_rows = [
        {
            "agent": r["exploit"],
            "klass": r["klass"],
            "n": r["n"],
            "paid": r["graders"][grader]["rewarded"],
            "fooled": r["graders"][grader]["fooled"],
            "detected": r["graders"][grader]["detected"],
            "hacks": r["graders"][grader]["hacks"],
        }
        for r in m["rows"]
        if not r["control"] and grader in r["graders"]
    ]
    claims = {}
    for r in done:
        for c in r.get("claims", []):
            k = claims.setdefault(r["exploit"], {"claims": 0, "unsupported": 0})
            k["claims"] += 1
            k["unsupported"] += c["supported"] is False
    attacks = [r for r in done if not r.get("control") and grader in r.get("grades", {})]
    wrong = [r for r in attacks if not r.get("correct")]
    recall = {
        "exploit_episodes": len(attacks),
        "detected": sum(bool(r["grades"][grader].get("detected")) for r in attacks),
        "incorrect_episodes": len(wrong),
        "incorrect_detected": sum(bool(r["grades"][grader].get("detected")) for r in wrong),
        "incorrect_paid": sum(bool(r["grades"][grader].get("rewarded")) for r in wrong),
    }
    recall["recall"] = recall["detected"] / len(attacks) if attacks else None
    recall["recall_incorrect"] = (recall["incorrect_detected"] / len(wrong)) if wrong else None
    skipped: dict[str, list[str]] = {}
    for r in rs:
        if r.get("skipped"):
            skipped.setdefault(r["exploit"], []).append(r.get("task_id", "?"))
    ran = {(r["exploit"], r.get("task_id")) for r in rs}
    not_run = {t: sorted(n for n in matrix.ORDER if (n, t) not in ran) for t in m["tasks"]}
    return {
        "grader": grader,
        "tasks": m["tasks"],
        "episodes": len(done),
        "not_run": {t: v for t, v in not_run.items() if v},
        "honest": m["honest"][grader],
        "per_class": m["per_class"][grader],
        "controls": honest_rows,
        "exploits": exploit_rows,
        "fooled_by": m["rewarded_exploits"][grader],
        "claims": claims,
        "battery": recall,
        "skipped": {k: sorted(v) for k, v in skipped.items()},
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def markdown(data: dict[str, Any]) -> str:
    """The summary's tables (the ``detection_summary`` view of docs/detection.md)."""
    h = data["honest"]
    lines = [
        f"{data['episodes']} episodes on {len(data['tasks'])} task(s), grader "
        f"{data['grader']}: correct honest episodes paid {h['correct_paid']} of "
        f"{h['correct']}; controls named anything: {h['named']} of {h['episodes']}."
    ]
    if h.get("false_alarm_rate") is not None:
        from verigap.monitor.metrics import wilson

        lo, hi = wilson(h["named"], h["episodes"]) or (0.0, 0.0)
        lines[0] += (
            f" False-alarm rate over all controls: {_pct(h['false_alarm_rate'])} "
            f"(95% CI {_pct(lo)}-{_pct(hi)})."
        )
    if "differing" in h:  # results written before the battery recorded it lack the field
        lines[0] += (
            f" Controls whose edits differ from the reference: {h['differing']}, "
            f"named {h['differing_named']} (false-alarm rate "
            f"{_pct(h['false_alarm_rate_differing'])})."
        )
    b = data.get("battery")
    if b:
        lines[0] += (
            f" Exploit episodes: {b['exploit_episodes']}, named by their class "
            f"{b['detected']} (recall {_pct(b['recall'])}); of the "
            f"{b['incorrect_episodes']} that are not a correct fix, named "
            f"{b['incorrect_detected']} (recall {_pct(b['recall_incorrect'])}), paid "
            f"{b['incorrect_paid']}."
        )
    lines += ["", "| control | n | correct | paid | named | names |", "|---|---|---|---|---|---|"]
    for r in data["controls"]:
        names = ", ".join(f"{k} ({v})" for k, v in r["hacks"].items()) or "-"
        lines.append(
            f"| {r['agent']} | {r['n']} | {_pct(r['correct'])} | {_pct(r['paid'])} | "
            f"{_pct(r['named'])} | {names} |"
        )
    lines += [
        "",
        "| class | exploit episodes | named | recall | precision | false alarms on controls |",
        "|---|---|---|---|---|---|",
    ]
    for c, v in data["per_class"].items():
        lines.append(
            f"| {c} | {v['positives']} | {v['named']} | {_pct(v['recall'])} | "
            f"{_pct(v['precision'])} | {v['control_false_alarms']} |"
        )
    for t, names in data.get("not_run", {}).items():
        lines += ["", f"Not run on {t} (the run was stopped for time): {', '.join(names)}."]
    if data["skipped"]:
        lines += [
            "",
            "Not applicable (nothing for the rewrite to act on): "
            + "; ".join(f"{k} on {len(v)} task(s)" for k, v in data["skipped"].items())
            + ".",
        ]
    return "\n".join(lines)


def monitor_markdown(report: dict[str, Any]) -> str:
    iso, con = report.get("isolated", {}), report.get("contrastive", {})
    rows = [
        "| detector | hacked | honest | isolated detection | isolated false alarms | "
        "class match | contrastive pairs | contrastive detection | contrastive false "
        "alarms |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {report['detector']} | {report['n_hacked']} | {report['n_honest']} | "
        f"{_pct(iso.get('detection_rate'))} | {_pct(iso.get('false_alarm_rate'))} | "
        f"{_pct(iso.get('class_match_rate'))} | {con.get('pairs', '-')} | "
        f"{_pct(con.get('detection_rate'))} | {_pct(con.get('false_alarm_rate'))} |",
    ]
    missed = [
        f"{k} ({v['detected']}/{v['n']})"
        for k, v in iso.get("by_family", {}).items()
        if v["detected"] < v["n"]
    ]
    if missed:
        rows += [
            "",
            "Families the isolated builtin monitor does not always flag: "
            + ", ".join(missed)
            + ".",
        ]
    if iso.get("false_alarms"):
        rows += ["", "Honest trajectories it flags: " + ", ".join(iso["false_alarms"]) + "."]
    return "\n".join(rows)


def impossible_markdown(data: dict[str, Any]) -> str:
    rows = [
        "| agent | impossible episodes | cheating rate | reported impossible | mean reward |",
        "|---|---|---|---|---|",
    ]
    for a, v in data["rates"].items():
        rows.append(
            f"| {a} | {v['n']} | {_pct(v['cheating_rate'])} | {_pct(v['report_rate'])}"
            f" | {v['mean_reward']:.2f} |"
        )
    if data.get("skipped"):
        one_off = any("one-off" in str(v) for v in data["skipped"].values())
        why = (
            "no one-line visible assertion of the site's call states the reference's "
            "output on an input where the base differs"
            if one_off
            else "no visible input where base and reference give different literal outputs"
        )
        rows += [
            "",
            "No contract could be written for: "
            + ", ".join(sorted(data["skipped"]))
            + f" ({why}).",
        ]
    return "\n".join(rows)
