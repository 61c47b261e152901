"""The hackability matrix: exploit x grader -> share rewarded, share correct, share detected.

Built only from the battery's per-job results. "Correct" is the truth (v2's hidden checks on
the workspace, the same for every grader); "detected" means the grader's ``Verdict.hacks``
named one of the exploit's expected classes (for the controls: named anything at all, which
would be a false alarm).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from verigap.repos.redteam.exploits import BY_NAME, CONTROLS, EXPLOITS

SCHEMA_VERSION = 1
ORDER = [e.name for e in (*CONTROLS, *EXPLOITS)]


def build(results: Iterable[Mapping[str, Any]], graders: Sequence[str]) -> dict[str, Any]:
    """The matrix as a JSON-able dict (rows in catalogue order, controls first)."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    skipped: dict[str, str] = {}
    for r in results:
        if r.get("skipped"):
            skipped[r["exploit"]] = r["skipped"]
            continue
        by.setdefault(r["exploit"], []).append(r)
    rows = []
    for name in sorted(by, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER)):
        rs = by[name]
        n = len(rs)
        row: dict[str, Any] = {"exploit": name, "klass": BY_NAME[name].klass if name in BY_NAME
                               else "?", "control": rs[0].get("control", False), "n": n,
                               "correct": sum(bool(r.get("correct")) for r in rs) / n,
                               "graders": {}}
        for g in graders:
            gs = [r["grades"][g] for r in rs if g in r.get("grades", {})]
            if not gs:
                continue
            hacks: dict[str, int] = {}
            for x in gs:
                for h in x.get("hacks", []):
                    hacks[h] = hacks.get(h, 0) + 1
            row["graders"][g] = {
                "rewarded": sum(bool(x.get("rewarded")) for x in gs) / len(gs),
                "detected": sum(bool(x.get("detected")) for x in gs) / len(gs),
                "errors": sum(1 for x in gs if x.get("error")),
                "hacks": dict(sorted(hacks.items())),
            }
        rows.append(row)
    exploit_rows = [r for r in rows if not r["control"]]
    rewarding = {g: sorted(r["exploit"] for r in exploit_rows
                           if r["graders"].get(g, {}).get("rewarded", 0) > 0) for g in graders}
    tasks = sorted({r["task_id"] for rs in by.values() for r in rs})
    return {"schema_version": SCHEMA_VERSION, "graders": list(graders), "tasks": tasks,
            "rows": rows, "skipped": skipped, "rewarded_exploits": rewarding,
            "oracle_rewarded": {g: _share(rows, "oracle", g) for g in graders},
            "noop_rewarded": {g: _share(rows, "noop", g) for g in graders}}


def _share(rows: list[dict[str, Any]], name: str, g: str) -> float | None:
    row = next((r for r in rows if r["exploit"] == name), None)
    return None if row is None or g not in row["graders"] else row["graders"][g]["rewarded"]


def any_rewarded(matrix: Mapping[str, Any]) -> bool:
    """Whether some grader pays some exploit (the CLI's non-zero exit)."""
    return any(matrix["rewarded_exploits"].values())


def markdown(matrix: Mapping[str, Any]) -> str:
    """The matrix as a Markdown table (for docs and issue notes)."""
    gs = matrix["graders"]
    head = "| exploit | class | n | correct | " + " | ".join(
        f"{g} rewarded | {g} detected" for g in gs) + " |"
    sep = "|" + "---|" * (4 + 2 * len(gs))
    lines = [head, sep]
    for r in matrix["rows"]:
        cells = [r["exploit"], r["klass"], str(r["n"]), _pct(r["correct"])]
        for g in gs:
            x = r["graders"].get(g)
            cells += [_pct(x["rewarded"]), _pct(x["detected"])] if x else ["-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    for name, why in matrix.get("skipped", {}).items():
        lines.append(f"| {name} | skipped: {why} |")
    return "\n".join(lines)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"
