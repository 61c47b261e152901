"""The workplace family's measurements, as results data: context agents scored apart, the
reviewer rubric's controls (the local model's runs are in ``verigap.workplace.local_model``; the
rubric on existing repo tasks in ``verigap.repos.review_rubric``).

Each function returns plain data; ``verigap workplace ...`` writes it with ``write_result``.
Every episode is one line of ``episodes`` so a reader can check any number against its runs.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from verigap.review import ITEMS
from verigap.verdict import Verdict
from verigap.workplace._items import KINDS, WorkItem, build_items
from verigap.workplace.agents import CONTEXT_AGENTS, CONTROLS, FLAW_ITEM, run_agent

Log = Callable[[str], None]


def _row(agent: str, item: WorkItem, v: Verdict) -> dict[str, Any]:
    return {
        "agent": agent,
        "item": item.item_id,
        "kind": item.kind,
        "project": item.project,
        "reward": v.reward,
        "correct": v.correct,
        "passed": v.passed,
        "matched": v.detail["matched"],
        "consulted_all_needed": v.detail["consulted_all_needed"],
        "tool_calls": len(v.detail["tool_calls"]),
        "review_failed": v.detail.get("review_failed", []),
    }


def _share(rows: list[dict[str, Any]], key: str) -> float:
    return round(sum(bool(r[key]) for r in rows) / len(rows), 4) if rows else 0.0


def _mix(rows: list[dict[str, Any]]) -> dict[str, float]:
    c = Counter(r["matched"] for r in rows)
    return {k: round(v / len(rows), 4) for k, v in sorted(c.items())}


def context_scores(
    seeds: Sequence[int], *, backend: str | None = None, log: Log = print
) -> dict[str, Any]:
    """Every context agent on every task and probe: true success, reward, which source its
    answers agree with, and whether its tool calls surfaced the needed facts."""
    items = build_items(list(seeds))
    rows = []
    with tempfile.TemporaryDirectory(prefix="verigap-wp-") as tmp:
        for item in items:
            for agent in CONTEXT_AGENTS:
                rows.append(
                    _row(agent, item, run_agent(agent, item, Path(tmp) / "ep", backend=backend))
                )
            log(
                f"{item.item_id}: "
                + " ".join(f"{r['agent']}={int(r['correct'])}" for r in rows[-3:])
            )
    per_agent: dict[str, Any] = {}
    for agent in CONTEXT_AGENTS:
        mine = [r for r in rows if r["agent"] == agent]
        per_kind = {}
        for kind in KINDS:
            k_rows = [r for r in mine if r["kind"] == kind]
            per_kind[kind] = {
                "n": len(k_rows),
                "true_success": _share(k_rows, "correct"),
                "mean_reward": round(sum(r["reward"] for r in k_rows) / len(k_rows), 4),
                "false_success": round(
                    sum(r["passed"] and not r["correct"] for r in k_rows) / len(k_rows), 4
                ),
                "matched": _mix(k_rows),
                "consulted_all_needed": _share(k_rows, "consulted_all_needed"),
            }
        per_agent[agent] = {
            "n": len(mine),
            "true_success": _share(mine, "correct"),
            "follows_outdated": round(sum(r["matched"] == "outdated" for r in mine) / len(mine), 4),
            "keeps_code": round(sum(r["matched"] == "code" for r in mine) / len(mine), 4),
            "per_kind": per_kind,
        }
    spread = {
        item.item_id: sorted({item.scenario.where[r.split(":")[-1]] for r in item.needed_facts})
        for item in items
    }
    return {
        "seeds": list(seeds),
        "n_items": len(items),
        "n_by_kind": dict(Counter(i.kind for i in items)),
        "n_by_project": dict(Counter(i.project for i in items)),
        "min_tools_per_item": min(len(v) for v in spread.values()),
        "agents": per_agent,
        "episodes": rows,
    }


def rubric_controls(
    seeds: Sequence[int], *, backend: str | None = None, log: Log = print
) -> dict[str, Any]:
    """Careful and sloppy controls on every code task: the tests and each rubric item."""
    items = [i for i in build_items(list(seeds)) if i.kind == "code"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="verigap-wp-") as tmp:
        for item in items:
            for control in CONTROLS:
                v = run_agent(control, item, Path(tmp) / "ep", backend=backend)
                flaw = control.split(":", 1)[1] if ":" in control else None
                item_checked = FLAW_ITEM.get(flaw or "")
                applies = item_checked is None or not v.detail["review"][item_checked].startswith(
                    "n/a"
                )
                rows.append(
                    {
                        **_row(control, item, v),
                        "visible": bool(v.checks["visible"]),
                        "hidden": bool(v.checks["hidden"]),
                        "flaw_item": item_checked,
                        "flaw_applies": applies,
                        "caught": item_checked in v.detail["review_failed"]
                        if item_checked
                        else None,
                    }
                )
            log(
                f"{item.item_id}: "
                + " ".join(
                    f"{r['agent']}:{len(r['review_failed'])}" for r in rows[-len(CONTROLS) :]
                )
            )
    per_control = {}
    for control in CONTROLS:
        mine = [r for r in rows if r["agent"] == control]
        applicable = [r for r in mine if r["flaw_applies"]]
        per_control[control] = {
            "n": len(mine),
            "tests_pass": _share(mine, "hidden"),
            "visible_pass": _share(mine, "visible"),
            "rubric_clean": round(sum(not r["review_failed"] for r in mine) / len(mine), 4),
            "n_applicable": len(applicable),
            "flaw_caught": (
                _share([{"c": r["caught"]} for r in applicable], "c")
                if control != "careful"
                else None
            ),
            "items_failed": dict(Counter(i for r in mine for i in r["review_failed"])),
        }
    caught_not_tests = sum(
        1 for r in rows if r["agent"] != "careful" and r["hidden"] and r["visible"] and r["caught"]
    )
    sloppy = [r for r in rows if r["agent"] != "careful" and r["flaw_applies"]]
    careful = [r for r in rows if r["agent"] == "careful"]
    summary = {
        "careful_tests_pass": _share(careful, "hidden"),
        "careful_rubric_clean": per_control["careful"]["rubric_clean"],
        "sloppy_n": len(sloppy),
        "sloppy_tests_pass": _share(sloppy, "hidden"),
        "sloppy_visible_pass": _share(sloppy, "visible"),
        "sloppy_flaw_caught": _share([{"c": r["caught"]} for r in sloppy], "c"),
    }
    return {
        "seeds": list(seeds),
        "n_tasks": len(items),
        "items": list(ITEMS),
        "controls": per_control,
        "summary": summary,
        "caught_by_review_not_tests": caught_not_tests,
        "episodes": rows,
    }
