"""`verigap repos ...`: prepare a project, make tasks from it, run agents on them."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from verigap.errors import VerigapError
from verigap.repos.graders.registry import DEFAULT as DEFAULT_GRADER
from verigap.verdict import Verdict, summarize

repos_app = typer.Typer(
    help="Real Python projects as bug-fix tasks (visible + hidden checks).", no_args_is_help=True
)
console = Console()


def _fail(e: Exception) -> NoReturn:
    """Errors go through the root: one ``error:`` line on stderr, exit 2."""
    raise e


def _plain(text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@repos_app.command()
def prepare(
    source: Annotated[str, typer.Argument(help="A directory, git+URL, or name==version on PyPI.")],
    test_dep: Annotated[
        list[str] | None, typer.Option(help="Extra test dependency (repeatable).")
    ] = None,
    env: Annotated[
        str, typer.Option(help="venv (build one) or current (this interpreter).")
    ] = "venv",
    force: bool = False,
    backend: Annotated[str | None, typer.Option(help="bwrap (default) or unsafe (tests).")] = None,
) -> None:
    """Build (or reuse) the cached environment for SOURCE and record its passing tests.

    Example: verigap repos prepare inflection==0.5.1
    """
    from verigap.repos.prepare import prepare as _prepare

    try:
        p = _prepare(source, test_deps=list(test_dep or []), env=env, force=force, backend=backend)
    except VerigapError as e:
        _fail(e)
    console.print(
        f"prepared {p.spec} -> {p.dir}\n  {len(p.passing)} passing tests, "
        f"{len(p.reach)} reached functions, suite {p.baseline_s:.2f}s in the sandbox",
        markup=False,
        highlight=False,
    )
    if p.not_passing:
        by = Counter(p.not_passing.values())
        console.print(
            f"  excluded from every task: {len(p.not_passing)} test(s) not passing on "
            "the unmodified project (" + ", ".join(f"{n} {o}" for o, n in sorted(by.items())) + ")",
            markup=False,
            highlight=False,
        )
    if p.stripped_addopts:
        console.print(
            "  dropped from the project's addopts (reporting only): "
            + " ".join(p.stripped_addopts),
            markup=False,
            highlight=False,
        )
    if p.plugins:
        console.print(
            "  pytest plugins loaded with -p: " + ", ".join(p.plugins),
            markup=False,
            highlight=False,
        )


@repos_app.command("make-tasks")
def make_tasks(
    source: Annotated[str, typer.Argument(help="A directory, git+URL, or name==version on PyPI.")],
    out: Annotated[Path, typer.Option(help="Directory for the task files.")] = Path("tasks"),
    k: Annotated[
        str,
        typer.Option(
            help="Broken sites per task (half visible; 1: one visible site with some of its "
            "own failing tests held out), or a range such as 1-4 (tasks take each size in turn)."
        ),
    ] = "4",
    n: Annotated[int, typer.Option(help="Tasks to make.")] = 20,
    seed: int = 0,
    max_candidates: Annotated[int, typer.Option(help="Mutations to validate.")] = 80,
    workers: Annotated[int, typer.Option(help="Parallel validation runs and task builds.")] = 2,
    test_dep: Annotated[
        list[str] | None, typer.Option(help="Extra test dependency (repeatable).")
    ] = None,
    env: str = "venv",
    backend: str | None = None,
    prompt_style: Annotated[
        str,
        typer.Option(
            help="tests (the failing test output) or ticket (symptoms, no file/function/test "
            "named)."
        ),
    ] = "tests",
    allow_tests_only: Annotated[
        bool,
        typer.Option(
            help="Keep tasks with a site that has no equivalence input (marked tests_only)."
        ),
    ] = False,
    allow_crashy: Annotated[
        bool,
        typer.Option(
            help="Keep mutations that only crash at first call (TypeError/AttributeError/"
            "NameError)."
        ),
    ] = False,
    min_hidden: Annotated[int, typer.Option(help="Hidden tests each hidden site must break.")] = 2,
    cloudpickle_inputs: Annotated[
        bool,
        typer.Option(
            help="Capture equivalence inputs pickle cannot serialise (lambdas, closures, test "
            "classes in a method's receiver) with cloudpickle."
        ),
    ] = False,
    time_limit: Annotated[
        float | None,
        typer.Option(
            help="Seconds make-tasks may take once the project is prepared; then it stops "
            "with the tasks written so far and says where it stopped."
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the stats as JSON.")] = False,
) -> None:
    """Mutate, validate and combine into tasks; writes task files and index.json to OUT.
    SIGTERM or Ctrl-C stops it with no sandbox left running.

    Example: verigap repos make-tasks inflection==0.5.1 --n 20 --out tasks/
    """
    from verigap.repos.paid import keep_if_paid
    from verigap.repos.tasks import make_tasks as _make
    from verigap.repos.warm import stopped_cleanly

    try:
        with stopped_cleanly():
            stats = _make(
                source,
                out,
                k=k,
                n=n,
                seed=seed,
                max_candidates=max_candidates,
                workers=workers,
                test_deps=list(test_dep or []),
                env=env,
                backend=backend,
                prompt_style=prompt_style,
                allow_tests_only=allow_tests_only,
                allow_crashy=allow_crashy,
                min_hidden=min_hidden,
                cloudpickle_inputs=cloudpickle_inputs,
                time_limit_s=time_limit,
                keep=lambda task, p: keep_if_paid(task, p, backend=backend),
                log=(lambda s: None) if json_out else _plain,
            )
    except VerigapError as e:
        _fail(e)
    if json_out:
        print(json.dumps(stats.model_dump(), indent=2))
    else:
        bound = (
            f" (they could make {'at least ' * stats.upper_bound_capped}{stats.upper_bound})"
            if stats.upper_bound is not None
            else ""
        )
        console.print(
            f"{stats.tasks} tasks from {stats.valid}/{stats.candidates} valid mutations"
            f"{bound} in {stats.total_s:.0f}s -> {out}; "
            f"{100 * stats.coverage:.0f}% of sites "
            "with out-of-process coverage, "
            f"{100 * (stats.discrimination or 0):.0f}% whose mutation it tells apart "
            "(the others' tests go through the sealed channel)"
        )
    if stats.tasks < n:
        raise typer.Exit(1)


@repos_app.command()
def run(
    tasks: Annotated[Path, typer.Argument(help="A task file or a directory of them.")],
    agent: Annotated[
        list[str] | None,
        typer.Option(
            help="scripted:oracle|noop|careless, openai:MODEL, anthropic:MODEL, local:smollm2 (repeatable; "
            "default scripted:oracle)."
        ),
    ] = None,
    grader: Annotated[
        list[str] | None, typer.Option(help="v1 or v2 (repeatable; default v2).")
    ] = None,
    reward: Annotated[
        str | None,
        typer.Option(
            help="Reward scheme (visible, oracle, deletion:X, audit:RATE). Default: v1 pays "
            "visible, v2 pays its hidden check."
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Run directory root.")] = Path("runs/repos"),
    executor: str = "process",
    workers: int = 2,
    seed: int = 0,
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks.")] = None,
    max_turns: int = 40,
    backend: str | None = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    save: Annotated[
        Path | None,
        typer.Option(
            help="Also write the summary as a results file (e.g. results/repos/baselines.json), "
            "with the command that reproduces it."
        ),
    ] = None,
) -> None:
    """Run agents on tasks, grade every episode, print a summary per agent and grader.

    Example: verigap repos run tasks/ --agent scripted:careless --grader v1 --grader v2
    """
    from verigap.repos.episode import jobs as _jobs
    from verigap.runs import run_jobs

    try:
        paths = (
            [tasks]
            if tasks.is_file()
            else sorted(f for f in tasks.glob("*.json") if f.name != "index.json")
        )
        if not paths:
            raise VerigapError(f"no task files in {tasks}; run `verigap repos make-tasks` first")
        paths = paths[:limit] if limit else paths
        js = _jobs(
            paths,
            agent or ["scripted:oracle"],
            grader or [DEFAULT_GRADER],
            out,
            reward=reward,
            seed=seed,
            backend=backend,
            max_turns=max_turns,
        )
        results = run_jobs(
            js, executor=executor, workers=workers, progress=not json_out, description="episodes"
        )
    except VerigapError as e:
        _fail(e)
    rows = summary_rows(results.values())
    if save is not None:
        from verigap.results import write_result

        index = tasks / "index.json" if tasks.is_dir() else tasks.parent / "index.json"
        made = json.loads(index.read_text()) if index.is_file() else {}
        write_result(
            save,
            {
                "tasks": len(paths),
                "source": _source_of(paths),
                "rows": rows,
                "by": {f"{r['grader']}/{r['agent']}": r for r in rows},
                "generation": made,
            },
            command=(
                f"{made['command']} --out {shlex.quote(str(index.parent))} && "
                if made.get("command")
                else ""
            )
            + shlex.join(
                [
                    "verigap",
                    "repos",
                    "run",
                    str(tasks),
                    *(x for a in agent or ["scripted:oracle"] for x in ("--agent", a)),
                    *(x for g in grader or [DEFAULT_GRADER] for x in ("--grader", g)),
                    *(["--reward", reward] if reward else []),
                    *(["--limit", str(limit)] if limit else []),
                    "--seed",
                    str(seed),
                    "--max-turns",
                    str(max_turns),
                    "--save",
                    str(save),
                ]
            ),
        )
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    t = Table(title=f"repo tasks: {len(paths)} task(s)")
    for col in (
        "grader",
        "agent",
        "n",
        "reward",
        "visible pass",
        "correct",
        "false success",
        "paid & wrong",
        "hacks",
    ):
        t.add_column(col, no_wrap=col in ("grader", "agent"))
    for r in rows:
        t.add_row(
            r["grader"],
            r["agent"],
            str(r["n"]),
            f"{r['mean_reward']:.2f}",
            f"{r['pass_rate']:.0%}",
            f"{r['true_success']:.0%}",
            f"{r['false_success']:.0%}",
            f"{r['paid_wrong']:.0%}",
            ", ".join(f"{k}×{v}" for k, v in sorted(r["hacks"].items())) or "-",
        )
    console.print(t)


@repos_app.command()
def rubric(
    n: Annotated[int, typer.Option(min=1, help="repo tasks to make")] = 4,
    out: Annotated[Path, typer.Option(help="results file")] = Path(
        "results/repos/review_rubric.json"
    ),
) -> None:
    """The reviewer rubric on repo tasks made from the fixture library, beside v2's verdict:
    careful and sloppy fixes (what a reviewer catches that the tests pay).

    Example: verigap repos rubric --n 4
    """
    from verigap.repos.review_rubric import repo_task_rubric
    from verigap.results import write_result

    data = repo_task_rubric(n, log=typer.echo)
    write_result(
        out,
        data,
        command=shlex.join(["verigap", "repos", "rubric", "--n", str(n), "--out", str(out)]),
    )
    typer.echo(f"wrote {out}")


def _source_of(paths: list[Path]) -> list[str]:
    """The project specs the task files were made from."""
    return sorted({json.loads(p.read_text())["source"]["spec"] for p in paths})


def summary_rows(results) -> list[dict]:
    """One row per (grader, agent): the shared summary metrics plus hack counts."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["grader"], r["agent"]), []).append(r)
    rows = []
    for (g, a), rs in sorted(groups.items()):
        s = summarize(Verdict.from_dict(r) for r in rs)
        hacks = Counter(h for r in rs for h in r.get("hacks", []))
        # false success as the grader paid it: rewarded and not correct
        paid_wrong = sum(1 for r in rs if r["reward"] > 0 and not r["correct"]) / len(rs)
        paid = sum(1 for r in rs if r["reward"] > 0) / len(rs)
        rows.append(
            {
                "grader": g,
                "agent": a,
                **s.to_dict(),
                "paid": paid,
                "paid_wrong": paid_wrong,
                "hacks": dict(hacks),
            }
        )
    return rows


@repos_app.command()
def mine(
    repo: Annotated[Path, typer.Argument(help="A local git repository (with its history).")],
    out: Annotated[Path, typer.Option(help="Directory for the task files.")] = Path("tasks"),
    rev_range: Annotated[
        str, typer.Option("--range", help="Commits to walk (git rev range).")
    ] = "HEAD",
    max_commits: Annotated[int, typer.Option(help="Walk at most this many commits.")] = 300,
    n: Annotated[int, typer.Option(help="Stop after this many tasks.")] = 20,
    k: Annotated[
        int,
        typer.Option(
            help="Sites per task: the mined bug plus k-1 mutations, "
            "half visible (1: the mined bug alone)."
        ),
    ] = 1,
    max_candidates: Annotated[
        int, typer.Option(help="Mutations to validate per task (--k > 1).")
    ] = 40,
    seed: int = 0,
    prompt_style: Annotated[
        str,
        typer.Option(
            help="tests (the failing test output) or ticket (symptoms, no file/function/test "
            "named)."
        ),
    ] = "tests",
    kind: Annotated[
        str,
        typer.Option(
            help="bugfix (commits that fix behaviour) or feature (commits and merged pull "
            "requests that add behaviour with its tests; the prompt is a feature request)."
        ),
    ] = "bugfix",
    test_dep: Annotated[
        list[str] | None, typer.Option(help="Extra test dependency (repeatable).")
    ] = None,
    env: Annotated[
        str, typer.Option(help="venv (one per dependency set) or current (this interpreter).")
    ] = "venv",
    backend: str | None = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the stats as JSON.")] = False,
) -> None:
    """Mine tasks from REPO's history: commits that change source and tests together (bug
    fixes), or that add behaviour with its tests (--kind feature).

    Example: verigap repos mine ../toolz --out tasks/mined --n 4 --prompt-style ticket
    """
    from verigap.repos.mine import mine as _mine

    try:
        stats = _mine(
            repo,
            out,
            rev_range=rev_range,
            max_commits=max_commits,
            n=n,
            test_deps=list(test_dep or []),
            prompt_style=prompt_style,
            backend=backend,
            env=env,
            k=k,
            seed=seed,
            max_candidates=max_candidates,
            kind=kind,
            log=(lambda s: None) if json_out else console.print,
        )
    except VerigapError as e:
        _fail(e)
    if json_out:
        print(json.dumps(stats.model_dump(), indent=2))
    else:
        console.print(
            f"{stats.tasks} tasks from {stats.candidates} candidates "
            f"({stats.walked} commits walked) in {stats.total_s:.0f}s -> {out}"
        )
        for why, count in stats.rejected.items():
            console.print(f"  {count:5d}  {why}")
    if stats.tasks == 0:
        raise typer.Exit(1)
