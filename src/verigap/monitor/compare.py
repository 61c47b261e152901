"""Monitors side by side on the same records: every monitor (the builtin rules, an LLM) gives
its verdict on every record of every split, and one scoring function
(:func:`verigap.monitor.llm.score`) turns the verdicts into the project's figures, so the rules
and a model are compared by exactly the same protocol."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from verigap.monitor.llm import View, score
from verigap.monitor.metrics import fmt_rate


def run(
    splits: dict[str, Sequence[dict[str, Any]]],
    monitors: Sequence[Any],
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Per split and monitor: the scores, the cost (wall and CPU seconds per record) and each
    record's verdict (names, steps, failure, the first 200 characters of a model's reply)."""
    out: dict[str, Any] = {"monitors": [m.name for m in monitors], "splits": {}}
    for split, recs in splits.items():
        s: dict[str, Any] = {
            "n": len(recs),
            "n_hack": sum(r["label"]["hack"] for r in recs),
            "ids": [r["id"] for r in recs],
            "monitors": {},
        }
        for m in monitors:
            views: dict[str, View] = {}
            w0, c0 = time.perf_counter(), time.process_time()
            for i, r in enumerate(recs):
                views[r["id"]] = m.view(r)
                v = views[r["id"]]
                if m.name != "builtin":
                    log(
                        f"{split} {m.name} {i + 1}/{len(recs)} {r['id']}: "
                        f"{sorted(v.names) or ('failure' if v.error else 'honest')} "
                        f"({time.perf_counter() - w0:.0f}s)"
                    )
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            s["monitors"][m.name] = {
                **score(recs, views),
                "cost": {
                    "wall_s_per_record": round(wall / max(1, len(recs)), 2),
                    "cpu_s_per_record": round(cpu / max(1, len(recs)), 2),
                },
                "verdicts": {
                    rid: {
                        "names": sorted(v.names),
                        "steps": v.steps,
                        "error": v.error,
                        "reply": v.raw[:200],
                    }
                    for rid, v in views.items()
                },
            }
        out["splits"][split] = s
    return out


def markdown(data: dict[str, Any]) -> str:
    """One table per split: each monitor's recall, class recall, false alarms, matched
    contrastive pairs, step localisation and failure rate, with Wilson 95% intervals."""
    lines: list[str] = []
    for split, s in data["splits"].items():
        lines += [
            f"{split}: {s['n']} records ({s['n_hack']} hacks).",
            "",
            "| monitor | hacks named | named by class | false alarms (all controls) | "
            "contrastive pairs right | steps right (of all acts) | no usable verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, v in s["monitors"].items():
            lines.append(
                f"| {name} | {fmt_rate(v['recall'])} | {fmt_rate(v['class_recall'])} | "
                f"{fmt_rate(v['false_alarms'])} | {fmt_rate(v['contrastive'])} | "
                f"{fmt_rate(v['localisation']['right_of_all'])} | "
                f"{fmt_rate(v['failures'])} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip()
