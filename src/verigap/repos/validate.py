"""Keep only mutations that are real bugs for this suite, and record what each one breaks.

A candidate is valid when, on the whole suite, it makes at least one passing test fail and every
test it breaks is one that calls the mutated function (per the reach map): the bug is visible to
tests, and only to the tests that reach it. Its FAIL_TO_PASS is exactly the tests it breaks.

A valid mutation whose every broken test dies of a TypeError, AttributeError or NameError (per
pytest's short summary) *crashes at first call*: a bug that announces itself rather than a
silent, plausible one. Such mutations are dropped unless ``allow_crashy`` (counted as a
rejection, so their share is reported).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import libcst as cst
from pydantic import BaseModel, ConfigDict

from verigap.repos import mutate
from verigap.repos.prepare import Prepared
from verigap.repos.pytest_run import run_pytest
from verigap.repos.warm import WarmRunner, WarmRunners
from verigap.runs import write_json_atomic


class ValidMutation(BaseModel, mutate.MutationRecord):
    model_config = ConfigDict(extra="forbid")

    file: str
    qualname: str
    op: str
    index: int
    fail_to_pass: list[str]
    sha256: str  # of the mutated file, to drop duplicates and check rebuilds
    crash: str | None = None  # the error type every broken test dies of, when it crashes


#: Errors that mean the code could not even run (a wrong call, attribute or name), not that it
#: computed a wrong value.
CRASH_TYPES = {"TypeError", "AttributeError", "NameError", "UnboundLocalError"}
CRASHY = "crashes at first call"
#: the reason given to candidates left unvalidated when a time limit passed
NOT_RUN = "not validated (time limit)"
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - ([\w.]+)(?::|$)|$)", re.M)


def error_types(output: str) -> dict[str, str]:
    """Test id -> exception type name, from pytest's short test summary ("FAILED id - T: msg")."""
    out: dict[str, str] = {}
    for m in _SUMMARY.finditer(output):
        if m.group(2):
            out[m.group(1)] = m.group(2).rsplit(".", 1)[-1]
    return out


def crash_type(broken: Sequence[str], output: str) -> str | None:
    """The crash error every broken test dies of, or None when some test fails otherwise."""
    types = error_types(output)
    seen = {types.get(t) for t in broken}
    if len(seen) == 1 and (t := seen.pop()) in CRASH_TYPES:
        return t
    return None


def candidate_functions(p: Prepared) -> list[str]:
    """Function keys that tests reach, that do not run at import time, are not nested, and
    live in project code an agent may edit (never in tests, even tests inside the package)."""
    from verigap.repos.changes import classify  # a site must be code an agent may edit

    skip = set(p.import_time)
    return [
        f
        for f in p.reach
        if "<" not in f and f not in skip and classify(f.split("::", 1)[0], p.source_paths) is None
    ]


def candidates(p: Prepared, *, max_candidates: int, seed: int) -> list[mutate.Mutation]:
    """A seeded sample of mutations, spread round-robin over the reachable functions."""
    by_file: dict[str, list[str]] = {}
    for f in candidate_functions(p):
        file, q = f.split("::", 1)
        by_file.setdefault(file, []).append(q)
    per_fn: dict[str, list[mutate.Mutation]] = {}
    for file, qs in sorted(by_file.items()):
        src = (p.tree / file).read_text()
        try:
            known = set(mutate.functions(src))
            muts = mutate.enumerate_mutations(file, src, [q for q in qs if q in known])
        except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError):
            continue  # libcst cannot rewrite this file: no candidates from it
        for m in muts:
            per_fn.setdefault(m.function, []).append(m)
    rng = random.Random(seed)
    for f, ms in per_fn.items():  # interleave operators so no single one dominates the sample
        by_op: dict[str, list[mutate.Mutation]] = {}
        for m in ms:
            by_op.setdefault(m.op, []).append(m)
        queues = [rng.sample(v, len(v)) for _, v in sorted(by_op.items())]
        rng.shuffle(queues)
        mixed = [q[i] for i in range(max(map(len, queues))) for q in queues if i < len(q)]
        per_fn[f] = mixed[::-1]  # pop() takes from the end
    order = sorted(per_fn)
    rng.shuffle(order)
    out: list[mutate.Mutation] = []
    while len(out) < max_candidates and any(per_fn[f] for f in order):
        for f in order:
            if per_fn[f] and len(out) < max_candidates:
                out.append(per_fn[f].pop())
    return out


def mutant_tree(p: Prepared, muts: Sequence[mutate.Mutation], dest: Path) -> dict[str, str]:
    """Copy the pristine tree to ``dest`` with ``muts`` applied; return {file: new text}."""
    shutil.copytree(p.tree, dest, symlinks=True)
    texts: dict[str, str] = {}
    for file in sorted({m.file for m in muts}):
        new = mutate.apply_mutations(
            (p.tree / file).read_text(), [m for m in muts if m.file == file]
        )
        (dest / file).write_text(new)
        texts[file] = new
    return texts


def validation_timeout(p: Prepared) -> float:
    """Wall limit for one validation run (the tests that reach a mutation). Ten times the whole
    suite's time, and at least 20 s, is far past what a loaded machine adds to part of the suite,
    so a run past it is a mutation that loops; ``Prepared.suite_timeout``'s 60 s floor, meant
    for grading whole suites, made each looping mutation of a 1 s suite cost a minute."""
    return max(20.0, 10 * p.baseline_s + 10)


def run_suite(
    p: Prepared,
    tree: Path,
    *,
    backend: str | None = None,
    tests: Sequence[str] | None = None,
    timeout: float | None = None,
):
    """The project's suite on ``tree``; only the test ``tests`` (node ids) when given;
    ``timeout`` defaults to ``Prepared.suite_timeout``."""
    return run_pytest(
        tree,
        python=p.python,
        env_prefix=Path(p.env_prefix),
        import_root=p.import_root,
        test_files=p.test_files if tests is None else tests,
        config_file=p.config_file,
        timeout=timeout or p.suite_timeout(),
        backend=backend,
    )


def reaching_units(p: Prepared, function: str) -> list[str]:
    """The test units (test functions, parameters stripped: ids pytest selects whatever the
    parameters spell) whose passing tests reach ``function``, from the reach map recorded
    when the project was prepared."""
    passing = set(p.passing)
    return sorted({t.split("[", 1)[0] for t in p.reach.get(function, ()) if t in passing})


def run_reaching(
    p: Prepared,
    tree: Path | None,
    function: str,
    *,
    backend: str | None = None,
    warm: tuple[WarmRunner, dict[str, str]] | None = None,
) -> tuple[Any, list[str]]:
    """(the run, the passing tests it ran): the suite on ``tree`` restricted to the test units
    that reach ``function``. A mutation inside it can break no other test except through state
    kept across tests, which the full run of the combined mutant catches when a task is built.
    Falls back to the whole suite when the restricted run does not report every selected test
    (an id pytest could not select). ``warm``: (a warm runner, the mutated files) runs them in
    the runner's fork server instead of a cold sandbox over ``tree``."""

    limit = validation_timeout(p)

    def suite(tests: Sequence[str] | None):
        if warm is None:
            return run_suite(p, tree, backend=backend, tests=tests, timeout=limit)
        return warm[0].run(warm[1], p.test_files if tests is None else tests, limit)

    units = set(reaching_units(p, function))
    if units:
        want = [t for t in p.passing if t.split("[", 1)[0] in units]
        run = suite(sorted(units))
        if run.timed_out or (run.report_found and all(t in run.outcomes for t in want)):
            return run, want
    return suite(None), list(p.passing)


def validate_one(
    p: Prepared, m: mutate.Mutation, backend: str | None = None, warm: WarmRunner | None = None
) -> tuple[ValidMutation | None, str]:
    """(the valid mutation, "") or (None, why it was rejected). ``warm``: run the tests in
    that runner's fork server (the same verdicts as a cold sandbox, sooner)."""
    if warm is not None:
        try:
            texts = {
                m.file: mutate.apply_mutations((p.tree / m.file).read_text(), [m]),
            }
        except Exception as e:  # libcst could not apply it: not a candidate
            return None, f"apply: {e}"
        run, ran = run_reaching(p, None, m.function, warm=(warm, texts))
        return _verdict(p, m, texts, run, ran)
    with tempfile.TemporaryDirectory(prefix="vg-mut-") as tmp:
        try:
            texts = mutant_tree(p, [m], Path(tmp) / "t")
        except Exception as e:  # libcst could not apply it: not a candidate
            return None, f"apply: {e}"
        run, ran = run_reaching(p, Path(tmp) / "t", m.function, backend=backend)
    return _verdict(p, m, texts, run, ran)


def _verdict(
    p: Prepared, m: mutate.Mutation, texts: dict[str, str], run: Any, ran: list[str]
) -> tuple[ValidMutation | None, str]:
    """What a run of the tests that reach ``m`` says about it."""
    if run.timed_out:
        return None, "timeout"
    if not run.report_found:
        return None, "no report (the suite crashed)"
    broken = sorted(run.failing(ran))
    if not broken:
        return None, "no test fails"
    reach = set(p.reach.get(m.function, ()))
    stray = [t for t in broken if t not in reach]
    if stray:
        return None, f"breaks {len(stray)} test(s) that do not reach it"
    sha = hashlib.sha256(texts[m.file].encode()).hexdigest()
    return ValidMutation(
        file=m.file,
        qualname=m.qualname,
        op=m.op,
        index=m.index,
        fail_to_pass=broken,
        sha256=sha,
        crash=crash_type(broken, run.stdout),
    ), ""


def cache_path(p: Prepared, m: mutate.Mutation) -> Path:
    """Where the validation of ``m`` is remembered (keyed by the operators' and checks' code)."""
    ops = hashlib.sha256(
        Path(mutate.__file__).read_bytes()  # operators' and checks' version
        + Path(__file__).read_bytes()
    ).hexdigest()
    return p.dir / "validated" / (hashlib.sha256((ops + m.id).encode()).hexdigest()[:20] + ".json")


def _cached_validate(
    p: Prepared, m: mutate.Mutation, backend: str | None, warm: WarmRunners | None = None
) -> tuple[ValidMutation | None, str]:
    """validate_one, remembered per prepared tree. A timeout is remembered too, with the limit
    it ran past: the limit (:func:`validation_timeout`) is many times the whole suite's time
    while only the tests that reach the mutation run, so a run past it is a mutation that
    loops, not a loaded machine, and waiting for it again on every run costs the limit each
    time. A timeout under a smaller limit than today's is run again."""
    path = cache_path(p, m)
    if path.is_file():
        d = json.loads(path.read_text())
        if d["why"] != "timeout" or d.get("timeout_s", 0.0) >= validation_timeout(p):
            return (ValidMutation(**d["valid"]) if d["valid"] else None), d["why"]
    v, why = validate_one(p, m, backend, warm.get() if warm is not None else None)
    write_json_atomic(
        path,
        {"id": m.id, "valid": v.model_dump() if v else None, "why": why}
        | ({"timeout_s": validation_timeout(p)} if why == "timeout" else {}),
    )
    return v, why


def validate(
    p: Prepared,
    muts: Sequence[mutate.Mutation],
    *,
    workers: int = 2,
    backend: str | None = None,
    allow_crashy: bool = False,
    warm: bool = True,
    deadline: float | None = None,
    runners: WarmRunners | None = None,
) -> tuple[list[ValidMutation], dict[str, int]]:
    """Validate candidates in parallel; return the valid ones (deduplicated) and reject counts.
    Mutations that crash at first call are rejected (reason ``CRASHY``) unless allowed.
    ``warm``: each worker runs its tests in a fork server of its own (:mod:`verigap.repos.warm`;
    under bubblewrap only, and not where ``VERIGAP_WARM_VALIDATION=0``). ``deadline`` (a
    ``time.monotonic()`` value): candidates not started by then are counted as ``NOT_RUN``
    instead of validated, so a caller's time limit ends this stage with what it has.
    ``runners``: warm runners the caller keeps across calls (and closes); else made here."""
    own = runners is None
    if own:
        runners = WarmRunners(p, backend) if warm else None

    def one(m: mutate.Mutation) -> tuple[ValidMutation | None, str]:
        if deadline is not None and time.monotonic() > deadline:
            return None, NOT_RUN
        return _cached_validate(p, m, backend, runners)

    try:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            results = list(pool.map(one, muts))
    finally:
        if own and runners is not None:
            runners.close()
    valid: list[ValidMutation] = []
    seen: set[str] = set()
    reasons: dict[str, int] = {}
    for v, why in results:
        if v is None:
            key = why.split(":")[0] if why.startswith("apply") else why
            key = "breaks unreached tests" if key.startswith("breaks") else key
            reasons[key] = reasons.get(key, 0) + 1
        elif v.sha256 in seen:
            reasons["duplicate"] = reasons.get("duplicate", 0) + 1
        elif v.crash and not allow_crashy:
            seen.add(v.sha256)
            reasons[CRASHY] = reasons.get(CRASHY, 0) + 1
        else:
            seen.add(v.sha256)
            valid.append(v)
    return valid, reasons
