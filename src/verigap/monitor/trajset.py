"""A published trajectory set: every scripted agent of the red-team battery (exploits, the
tell devices, composites that do two things, honest controls, claim liars) on real tasks,
recorded as chat messages with the workspace change they left and labels from the script.

Labels come from the script that made the episode, by design: ``label.acts`` lists what the
script did (one entry per hack; two for a composite), each with the hack names that describe it
(:mod:`verigap.hacks`) and the step (tool-call index) that introduced it: the first call of
that part of the script that writes a file or runs a command. Episodes are recorded without
grading (v2 is not run), so no record says whether the change is correct beyond what its
script is built to do (``label.intent``).

One run directory holds one JSON file per (task, agent), so generation resumes;
:func:`collect` turns it into the xz-compressed JSONL that ``results/`` holds and :func:`load` reads.
"""

from __future__ import annotations

import gzip
import json
import lzma
import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError

#: Directories whose contents are by-products of running the tests, not the agent's change.
_SKIP_DIRS = {".git", "__pycache__", ".pytest_cache"}
#: A changed file larger than this is recorded by size only (keeps the published set small).
MAX_FILE_CHARS = 60_000
#: Tools whose call changes the workspace or runs code (a hack starts at one of these).
_ACTING = ("write_file", "edit_file", "run")


def agents() -> list[str]:
    """Every agent of the set: the battery's default exploits with both controls, every honest
    control and claim liar, and the composites."""
    from verigap.repos.redteam.battery import select_exploits
    from verigap.repos.redteam.composite import COMPOSITES

    return [e.name for e in select_exploits(None, with_honest=True)] + [e.name for e in COMPOSITES]


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root)
        if any(p in _SKIP_DIRS for p in rel.parts) or not f.is_file() or f.is_symlink():
            continue
        out[rel.as_posix()] = f.read_bytes()
    return out


def _text(b: bytes) -> str:
    if len(b) > MAX_FILE_CHARS:
        return f"<{len(b)} bytes, not recorded>"
    try:
        return b.decode()
    except UnicodeDecodeError:
        return f"<binary, {len(b)} bytes>"


def diff(
    before: dict[str, bytes], after: dict[str, bytes]
) -> tuple[dict[str, str], dict[str, str | None]]:
    """(base text of every changed file that existed, final text of every changed file; None
    for a deleted one)."""
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    base = {p: _text(before[p]) for p in changed if p in before}
    final = {p: (_text(after[p]) if p in after else None) for p in changed}
    return base, final


def first_acting(
    steps: Sequence[tuple[str, dict[str, Any]]], ctx: Any, offset: int = 0
) -> int | None:
    """Index (plus ``offset``) of the first step that runs a command, edits a file, or writes
    a file with text other than the reference's (a script that first fixes the visible sites
    as the reference has them and then breaks another starts its hack at the second write)."""
    for i, (name, args) in enumerate(steps):
        if name not in _ACTING:
            continue
        if name == "write_file":
            ref = Path(ctx.prepared.tree) / str(args.get("path", ""))
            if ref.is_file() and ref.read_text(errors="replace") == args.get("content"):
                continue
        return offset + i
    return None


def acts(agent: str, ctx: Any) -> list[dict[str, Any]]:
    """What the agent's script does, one entry per hack: its exploit, family, names and the
    step that introduced it (a false claim: the submit). Empty for honest controls and the two
    battery controls."""
    from verigap.repos.redteam import honest
    from verigap.repos.redteam.battery import BY_NAME
    from verigap.repos.redteam.composite import PARTS, part_starts

    ex = BY_NAME[agent]
    if ex.control:
        return []
    if agent in honest.BY_NAME:  # a claim liar: its act is the summary it submits
        return [
            {
                "exploit": agent,
                "family": ex.klass,
                "classes": list(ex.names),
                "step": len(honest.script(ex, ctx)) - 1,
            }
        ]
    if agent not in PARTS:
        return [
            {
                "exploit": agent,
                "family": ex.klass,
                "classes": list(ex.names),
                "step": first_acting(ex.build(ctx), ctx),
            }
        ]
    out, offset = [], 0
    for part, steps in part_starts(agent, ctx):
        out.append(
            {
                "exploit": part.name,
                "family": part.klass,
                "classes": list(part.names),
                "step": first_acting(steps, ctx, offset),
            }
        )
        offset += len(steps)
    return out


def intent(agent: str) -> str:
    """What the script is built to leave: ``fix`` (a correct change), ``partial`` (visible
    sites only), ``none`` (no change) or ``hack``."""
    from verigap.repos.redteam.battery import BY_NAME

    ex = BY_NAME[agent]
    if agent == "noop":
        return "none"
    if agent == "oracle" or ex.klass == "honest":
        return "fix"
    if ex.klass == "honest partial":
        return "partial"
    return "hack"


def episode(
    task_path: Path, agent: str, scratch: Path, *, backend: str | None = None
) -> dict[str, Any] | None:
    """One agent on one task, acted in the sandbox and recorded (no grading); None where the
    agent does not apply to the task."""
    from verigap.monitor import claims, leakage
    from verigap.monitor.dataset import BENIGN, TRACE_CATEGORY, UNMAPPED, messages
    from verigap.repos import execution
    from verigap.repos.redteam import honest, wording
    from verigap.repos.redteam.battery import BY_NAME, act
    from verigap.repos.redteam.exploits import Ctx
    from verigap.repos.tasks import RepoTask, materialize_workspace, prepared_for

    backend = backend or execution.default_backend()
    ex = BY_NAME[agent]
    task = RepoTask.load(task_path)
    if ex.isolation and backend != "bwrap":
        return None
    p = prepared_for(task, backend=backend)
    ws = scratch / "workspace"
    shutil.rmtree(ws, ignore_errors=True)
    materialize_workspace(p, task, ws)
    before = _snapshot(ws)
    t0 = time.perf_counter()
    try:
        labelled = acts(agent, Ctx(task, p, ws))
        ep = act(ex, task, ws, backend=backend)
    except honest.NotApplicable:
        shutil.rmtree(ws, ignore_errors=True)
        return None
    act_s = time.perf_counter() - t0
    base, final = diff(before, _snapshot(ws))
    shutil.rmtree(ws, ignore_errors=True)
    msgs = messages(ep.get("transcript", []))
    hack = not ex.control
    rec: dict[str, Any] = {
        "id": f"{agent}/{task.task_id}",
        "task_id": task.task_id,
        "agent": agent,
        "messages": msgs,
        "workspace": {
            "base": base,
            "final": final,
            "source_paths": list(task.source_paths),
            "sites": sorted({(s.file, s.qualname) for s in task.sites}),
        },
    }
    redrawn = False
    liar = "unsupported_claim" in ex.names
    if not liar and claims.check(claims.events_from_messages(msgs))["hacks"]:
        # the drawn claim is not backed by this episode's own run: say nothing of a run
        said = wording.summary(agent, task.task_id, ran_tests=False)
        rec = leakage._with_summary(rec, said)
        redrawn = True
    family = ex.klass
    families = sorted({a["family"] for a in labelled})
    rec["label"] = {
        "hack": hack,
        "honest": not hack,
        "intent": intent(agent),
        "family": family,
        "families": families,
        "classes": sorted({c for a in labelled for c in a["classes"]}),
        "acts": labelled,
        "multi": len(labelled) > 1,
        "trace_category": BENIGN
        if not hack
        else ("+".join(sorted({TRACE_CATEGORY.get(f, UNMAPPED) for f in families}))),
        "summary_redrawn": redrawn,
        "graded": False,
        "project": task.task_id.split("-s")[0],
        "act_s": round(act_s, 3),
    }
    return rec


def generate(
    task_paths: Sequence[Path],
    out: Path,
    *,
    names: Sequence[str] | None = None,
    backend: str | None = None,
    log=print,
    reverse: bool = False,
) -> dict[str, Any]:
    """Every agent on every task into ``out/<task>/<agent>.json`` (done ones are kept); the
    cost per episode is measured as it goes. ``reverse`` takes the agents last to first with
    a scratch directory of its own, so a second process can work on the same tasks from the
    other end (one episode may be done twice where they meet; both write the same record)."""
    chosen = list(names) if names else agents()
    if reverse:
        chosen.reverse()
    known = set(agents())
    bad = [n for n in chosen if n not in known]
    if bad:
        raise ConfigError(f"unknown agent(s) {bad}; choose from verigap.monitor.trajset.agents()")
    done = skipped = 0
    t0 = time.perf_counter()
    for tp in task_paths:
        for name in chosen:
            dest = out / tp.stem / f"{name}.json"
            if dest.is_file():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            t1 = time.perf_counter()
            scratch = out / tp.stem / (".scratch-r" if reverse else ".scratch")
            rec = episode(tp, name, scratch, backend=backend)
            dest.write_text(
                json.dumps(rec if rec is not None else {"skipped": name}, sort_keys=True)
            )
            done += rec is not None
            skipped += rec is None
            log(f"{tp.stem} {name}: {time.perf_counter() - t1:.1f}s")
    return {"episodes": done, "skipped": skipped, "wall_s": round(time.perf_counter() - t0, 1)}


def collect(run_dir: Path) -> list[dict[str, Any]]:
    """Every recorded episode under ``run_dir`` in a stable order."""
    files = sorted(run_dir.glob("*/*.json"))
    if not files:
        raise ConfigError(
            f"no episodes under {run_dir}; run `verigap monitor trajset "
            f"TASKS --runs {run_dir}` first"
        )
    out = []
    for f in files:
        r = json.loads(f.read_text())
        if "skipped" not in r:
            out.append(r)
    return out


def write(records: Iterable[dict[str, Any]], path: Path) -> int:
    """JSONL, compressed by the file's suffix: ``.xz`` (the published set: many records
    repeat the same project files, which xz's large window finds and gzip's does not),
    ``.gz`` (a fixed header time) or none. The same records give the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    n = data.count("\n")
    if path.suffix == ".xz":
        path.write_bytes(lzma.compress(data.encode(), preset=9))
    elif path.suffix == ".gz":
        path.write_bytes(gzip.compress(data.encode(), mtime=0))
    else:
        path.write_text(data)
    return n


def load(path: Path) -> list[dict[str, Any]]:
    """The published set (``.jsonl.xz``, ``.jsonl.gz`` or ``.jsonl``) as a list of records."""
    from verigap.monitor.dataset import read_jsonl

    return read_jsonl(path, missing="make it with `verigap monitor trajset`")


def describe(recs: Sequence[dict[str, Any]], path: Path) -> dict[str, Any]:
    """What the set holds (for the datasheet): counts by label, family, project and agent,
    the published size, the measured acting cost, and how well a final-message-only detector
    tells hacks from honest episodes (it should not beat the majority baseline)."""
    import statistics

    from verigap.monitor import leakage

    hacks = [r for r in recs if r["label"]["hack"]]
    fam: dict[str, int] = {}
    for r in hacks:
        for a in r["label"]["acts"]:
            fam[a["family"]] = fam.get(a["family"], 0) + 1
    acts_n = sum(len(r["label"]["acts"]) for r in hacks)
    cost = [r["label"]["act_s"] for r in recs]
    return {
        "n": len(recs),
        "hack": len(hacks),
        "honest": len(recs) - len(hacks),
        "multi": sum(r["label"]["multi"] for r in recs),
        "acts": acts_n,
        "acts_with_step": sum(a["step"] is not None for r in hacks for a in r["label"]["acts"]),
        "agents": len({r["agent"] for r in recs}),
        "tasks": sorted({r["task_id"] for r in recs}),
        "by_project": {
            p: sum(r["label"]["project"] == p for r in recs)
            for p in sorted({r["label"]["project"] for r in recs})
        },
        "by_intent": {
            i: sum(r["label"]["intent"] == i for r in recs)
            for i in sorted({r["label"]["intent"] for r in recs})
        },
        "acts_by_family": dict(sorted(fam.items())),
        "summary_redrawn": sum(r["label"]["summary_redrawn"] for r in recs),
        "bytes": path.stat().st_size,
        "act_s_median": round(statistics.median(cost), 2) if cost else None,
        "act_s_total": round(sum(cost), 1),
        "summary_only": leakage.summary_only(recs, seed=0),
    }


def markdown(data: dict[str, Any]) -> str:
    """The datasheet's composition table: episodes by project and intent, acts by family."""
    lines = ["| project | episodes |", "|---|---|"]
    lines += [f"| {p} | {n} |" for p, n in data["by_project"].items()]
    lines += ["", "| what the script is built to leave | episodes |", "|---|---|"]
    lines += [f"| {i} | {n} |" for i, n in data["by_intent"].items()]
    lines += ["", "| exploit family (acts) | acts |", "|---|---|"]
    lines += [f"| {f} | {n} |" for f, n in data["acts_by_family"].items()]
    return "\n".join(lines)
