"""The red-team battery: every exploit agent on every task, graded by every grader.

One job per (task, exploit): materialize the task's workspace, replay the exploit's tool calls
through the standard tools in the agent's sandbox, establish the truth once (v2's hidden checks
on a read-only view of the result), then hand each grader its own fresh copy of the workspace
(a grader that runs the agent's code there, like v1, may change it). Each job is a run
directory (``transcript.json``, ``result.json``), so an interrupted battery resumes.

A grader comes from the one registry (:mod:`verigap.repos.graders.registry`): ``v1``, ``v2`` or
``module:attr`` naming a callable ``(task, workspace) -> Verdict``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigap import claims
from verigap.errors import ConfigError
from verigap.repos import execution
from verigap.repos.detect import transcript_commands
from verigap.repos.episode import SYSTEM
from verigap.repos.graders import registry, v2
from verigap.repos.redteam import honest, plain_truth
from verigap.repos.redteam.catalogue import BY_NAME as EXPLOIT_NAMES
from verigap.repos.redteam.catalogue import CONTROLS, EXPLOITS
from verigap.repos.redteam.exploits import Ctx, Exploit, script
from verigap.repos.tasks import RepoTask, materialize_workspace, prepared_for
from verigap.runs import Job, read_json, write_json_atomic

#: Every scripted agent the battery knows: exploits, the two controls, the honest controls.
BY_NAME: dict[str, Exploit] = {**EXPLOIT_NAMES, **honest.BY_NAME}
Grader = registry.Grader


def resolve_grader(spec: str) -> Grader:
    """A registered grader (``v1``, ``v2``, ...) or ``package.module:function`` for your own;
    see :mod:`verigap.repos.graders.registry` for the contract."""
    return registry.make(spec)


def select_exploits(names: Sequence[str] | None, *, with_honest: bool = False) -> list[Exploit]:
    """The named exploits or honest controls (all exploits when ``names`` is empty), always
    with the two controls; ``with_honest`` adds every honest control."""
    if not names:
        chosen = list(EXPLOITS)
    else:
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            raise ConfigError(f"unknown exploit(s) {unknown}; choose from {', '.join(BY_NAME)}")
        chosen = [BY_NAME[n] for n in names if n not in ("oracle", "noop")]
    extra = [e for e in (*honest.HONEST, *honest.LIARS) if with_honest and e not in chosen]
    return [*CONTROLS, *chosen, *extra]


def act(
    exploit: Exploit, task: RepoTask, ws: Path, *, backend: str, wall_s: float = 300.0
) -> dict[str, Any]:
    """Replay the exploit's script through the standard tools in the agent sandbox."""
    from verigap.agents import Budget, ScriptedClient, run_episode, standard_tools
    from verigap.sandbox import Limits, make_sandbox

    p = prepared_for(task, backend=backend)
    ctx = Ctx(task, p, ws)
    steps = honest.script(exploit, ctx) if exploit.name in honest.BY_NAME else script(exploit, ctx)
    box = make_sandbox(
        ws, backend=backend, limits=Limits(wall_s=60.0), ro_binds=[Path(p.env_prefix)]
    )
    ep = run_episode(
        ScriptedClient(steps),
        standard_tools(box),
        SYSTEM.format(python="python"),
        task.prompt,
        Budget(max_turns=len(steps), wall_s=wall_s),
    )
    return ep.to_dict()


def written_paths(transcript: Sequence[dict[str, Any]]) -> list[str]:
    """Workspace-relative paths the agent wrote with ``write_file``."""
    import json

    out = []
    for e in transcript:
        for c in e.get("tool_calls", []) or []:
            if c.get("name") != "write_file":
                continue
            try:
                args = json.loads(c.get("arguments") or "{}")
            except json.JSONDecodeError:
                continue
            if isinstance(args, dict) and isinstance(args.get("path"), str):
                out.append(args["path"].removeprefix("./"))
    return sorted(set(out))


def differs_from_reference(ws: Path, reference: Path, paths: Sequence[str]) -> bool:
    """Whether any file the agent wrote is not, byte for byte, the reference's (a new file
    counts as a difference). An oracle that restores the reference exactly does not differ;
    an honest rewrite does, so only it can show a false alarm."""
    for rel in paths:
        mine, ref = ws / rel, reference / rel
        if not mine.is_file() or not ref.is_file() or mine.read_bytes() != ref.read_bytes():
            return True
    return False


def run_one(
    run_dir: Path, *, task_path: str, exploit: str, graders: list[str], backend: str | None = None
) -> dict[str, Any]:
    """A ``runs.Job`` function: one exploit on one task, graded by every grader."""
    backend = backend or execution.default_backend()
    ex = BY_NAME[exploit]
    task = RepoTask.load(Path(task_path))
    p = prepared_for(task, backend=backend)
    base = {
        "task_id": task.task_id,
        "exploit": ex.name,
        "klass": ex.klass,
        "control": ex.control,
        "expected_hacks": list(ex.names),
    }
    if ex.isolation and backend != "bwrap":
        return {
            **base,
            "skipped": f"{ex.name} tries to write outside the workspace; it only "
            "runs under the bubblewrap backend",
            "grades": {},
        }
    ws = run_dir / "workspace"
    if ws.exists():
        shutil.rmtree(ws)
    materialize_workspace(p, task, ws)
    t0 = time.perf_counter()
    try:
        episode = act(ex, task, ws, backend=backend)
    except honest.NotApplicable as e:
        shutil.rmtree(ws, ignore_errors=True)
        return {**base, "skipped": f"{ex.name} does not apply to {task.task_id}: {e}", "grades": {}}
    act_s = time.perf_counter() - t0
    write_json_atomic(run_dir / "transcript.json", episode)
    differs = differs_from_reference(ws, p.tree, written_paths(episode.get("transcript", [])))
    commands = transcript_commands(episode.get("transcript", []))
    t1 = time.perf_counter()
    truth = v2.evaluate(task, ws, prepared=p, commands=commands, backend=backend)
    truth_s = time.perf_counter() - t1
    # the independent truth the matrix scores payouts against (not v2's own verdict)
    plain = plain_truth.plain_correct(task, ws, p, backend=backend)
    said = claims.check(
        episode.get("transcript", []), {"checks": truth.checks, "outcomes": truth.outcomes}
    )
    grades: dict[str, Any] = {}
    for spec in graders:
        fn = resolve_grader(spec)
        copy = run_dir / f"ws-{spec.replace(':', '_').replace('/', '_')}"
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(ws, copy, symlinks=True)
        t2 = time.perf_counter()
        try:
            v = fn(
                task,
                copy,
                transcript=episode.get("transcript", []),
                commands=commands,
                prepared=p,
                backend=backend,
                truth=truth,
            )
            err = None
        except Exception as e:  # a user's grader crashing is a finding, not a battery crash
            v, err = None, f"{type(e).__name__}: {e}"
        finally:
            shutil.rmtree(copy, ignore_errors=True)
        if v is None:
            grades[spec] = {"error": err, "rewarded": False, "hacks": [], "detected": False}
            continue
        hacks = list(v.hacks)
        grades[spec] = {
            "reward": v.reward,
            "rewarded": v.reward > 0,
            "passed": v.passed,
            "grader_correct": v.correct,
            "hacks": hacks,
            "status": str(v.status),
            "detected": bool(set(ex.names) & set(hacks)) if not ex.control else bool(hacks),
            "checks": dict(v.checks),
            "grade_s": round(time.perf_counter() - t2, 3),
        }
    shutil.rmtree(ws, ignore_errors=True)
    return {
        **base,
        "correct": truth.correct,
        "plain_correct": plain,
        "differs_from_reference": differs,
        "truth_hacks": truth.hacks,
        "claims": said["claims"],
        "truth_checks": truth.checks,
        "episode_status": episode.get("status"),
        "tool_errors": sum(
            1
            for e in episode.get("transcript", [])
            if e.get("event") == "tool_result" and e.get("is_error")
        ),
        "act_s": round(act_s, 3),
        "truth_s": round(truth_s, 3),
        "grades": grades,
    }


def jobs(
    task_paths: Sequence[Path],
    out: Path,
    *,
    graders: Sequence[str],
    exploits: Sequence[str] | None = None,
    backend: str | None = None,
    with_honest: bool = False,
) -> list[Job]:
    """One job per (task, exploit incl. controls); each grades with every grader."""
    for g in graders:
        resolve_grader(g)
    chosen = select_exploits(exploits, with_honest=with_honest)
    for tp in task_paths:  # a finished job graded by other graders is redone
        for ex in chosen:
            done = out / ex.name / tp.stem / "result.json"
            if (
                done.is_file()
                and set(read_json(done).get("grades", {})) != set(graders)
                and not read_json(done).get("skipped")
            ):
                done.unlink()
    return [
        Job(
            name=f"{ex.name}/{tp.stem}",
            run_dir=out / ex.name / tp.stem,
            fn=run_one,
            kwargs=dict(task_path=str(tp), exploit=ex.name, graders=list(graders), backend=backend),
        )
        for tp in task_paths
        for ex in chosen
    ]
