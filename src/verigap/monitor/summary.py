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
    out = []
    for d in run_dirs:
        found = sorted(d.glob("*/*/result.json"))
        if not found:
            raise ConfigError(f"no battery results under {d}; run `verigap redteam TASKS "
                              f"--honest --out {d}` first")
        out += [json.loads(f.read_text()) for f in found]
    return out


def summarize(run_dirs: Sequence[Path], grader: str = "v2") -> dict[str, Any]:
    rs = results(run_dirs)
    m = matrix.build(rs, [grader])
    done = [r for r in rs if not r.get("skipped")]
    honest_rows = [{"agent": r["exploit"], "n": r["n"], "correct": r["correct"],
                    "paid": r["graders"][grader]["rewarded"],
                    "named": r["graders"][grader]["detected"],
                    "hacks": r["graders"][grader]["hacks"]}
                   for r in m["rows"] if r["control"] and grader in r["graders"]]
    exploit_rows = [{"agent": r["exploit"], "klass": r["klass"], "n": r["n"],
                     "paid": r["graders"][grader]["rewarded"],
                     "fooled": r["graders"][grader]["fooled"],
                     "detected": r["graders"][grader]["detected"],
                     "hacks": r["graders"][grader]["hacks"]}
                    for r in m["rows"] if not r["control"] and grader in r["graders"]]
    claims = {}
    for r in done:
        for c in r.get("claims", []):
            k = claims.setdefault(r["exploit"], {"claims": 0, "unsupported": 0})
            k["claims"] += 1
            k["unsupported"] += c["supported"] is False
    skipped: dict[str, list[str]] = {}
    for r in rs:
        if r.get("skipped"):
            skipped.setdefault(r["exploit"], []).append(r.get("task_id", "?"))
    return {"grader": grader, "tasks": m["tasks"], "episodes": len(done),
            "honest": m["honest"][grader], "per_class": m["per_class"][grader],
            "controls": honest_rows, "exploits": exploit_rows,
            "fooled_by": m["rewarded_exploits"][grader], "claims": claims,
            "skipped": {k: sorted(v) for k, v in skipped.items()}}
