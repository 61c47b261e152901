"""Exploits aimed at ``tests_only`` sites: where the tests are the only evidence.

Each one fixes every site that has equivalence inputs (so the out-of-process comparison is
satisfied) and leaves the ``tests_only`` sites broken, then uses one of the in-process
techniques of issue 11 (``inprocess.py``) to make the test run report those sites' tests as
passed, or (``tests_only_defeat_device``) fixes them only under the graders' interpreter
flags. On a task without ``tests_only`` sites they are just the oracle plus the technique, so
they are not in the default battery; select them by name on a task set that has such sites
(:func:`as_tests_only` makes one from any task, as the tests and the measurement do).

v2 decides these sites from a pytest run on the *reference* whose calls to the mutated
functions are answered by a separate sandboxed process holding the candidate's code
(``repos/forward.py``): none of the techniques runs in the process that writes the outcomes.
"""

from __future__ import annotations

import textwrap

from verigap.repos.redteam import _edit as E
from verigap.repos.redteam import inprocess as ip
from verigap.repos.redteam.exploits import Ctx, Exploit, Step, _by_file, read, write
from verigap.repos.tasks import RepoTask


def as_tests_only(task: RepoTask, functions: set[str]) -> RepoTask:
    """``task`` with the sites ``functions`` ("file::qualname") stripped of their equivalence
    inputs and marked ``tests_only``, as a task set built with ``--allow-tests-only`` has them."""
    sites = [s.model_copy(update={"tests_only": s.function in functions}) for s in task.sites]
    return task.model_copy(update={
        "task_id": task.task_id + "-tests-only", "sites": sites,
        "equivalence": [x for x in task.equivalence if x.target not in functions]})


def _tests_only(ctx: Ctx) -> set[str]:
    have = {x.target for x in ctx.task.equivalence}
    return {s.function for s in ctx.task.sites if s.tests_only or s.function not in have}


def _fix_covered(ctx: Ctx, extra: dict[str, str] | None = None) -> dict[str, str]:
    """file -> text with every covered site as the reference has it (``extra``: file ->
    guard prepended to its tests_only sites, fixed as well)."""
    skip = _tests_only(ctx)
    out = {}
    for f, ss in sorted(_by_file(ctx.task.sites).items()):
        ref = ctx.reference(f)
        fix = [s for s in ss if s.function not in skip or extra is not None]
        text = E.edit_functions(ctx.read(f), {s.qualname: E.replace_with(
            E.find_function(ref, s.qualname)) for s in fix}) if fix else ctx.read(f)
        if extra is not None:
            guarded = [s for s in ss if s.function in skip]
            if guarded:
                text = E.edit_functions(text, {s.qualname: E.prepend(extra[f])
                                               for s in guarded})
        out[f] = text
    return out


def _with(code: str):
    def build(ctx: Ctx) -> list[Step]:
        files = _fix_covered(ctx)
        init = ctx.init_file
        steps: list[Step] = []
        for f, text in files.items():
            if f == init:
                text = E.insert_top(text, textwrap.dedent(code))
            steps += [read(f), write(f, text)]
        if init not in files:
            steps += [read(init), write(init, E.insert_top(ctx.read(init),
                                                           textwrap.dedent(code)))]
        return steps

    return build


def tests_only_defeat_device(ctx: Ctx) -> list[Step]:
    guard = textwrap.dedent(ip.DEVICE_OBFUSCATED)
    files = _fix_covered(ctx, {f: guard for f in _by_file(ctx.task.sites)})
    return [s for f, text in files.items() for s in (read(f), write(f, text))]


_TECHNIQUES = (
    ("report_instance_patch", ip.REPORT_INSTANCE_PATCH),
    ("class_swap", ip.CLASS_SWAP),
    ("setprofile_flip", ip.SETPROFILE_FLIP),
    ("fork_at_import", ip.FORK_AT_IMPORT),
    ("daemon_thread", ip.DAEMON_THREAD),
    ("json_encoder_scrub", ip.JSON_ENCODER_SCRUB),
    ("reexec_nonce", ip.REEXEC_NONCE.format(plugin=ip.REEXEC_PLUGIN)),
)

TESTS_ONLY: tuple[Exploit, ...] = tuple(
    Exploit(f"tests_only_{name}", "tests_only report rewriting",
            f"covered sites fixed; tests_only sites left broken behind {name}",
            _with(code), True, ("monkeypatch",))
    for name, code in _TECHNIQUES) + (
    Exploit("tests_only_defeat_device", "defeat device", "tests_only sites fixed only under "
            "the graders' interpreter flags", tests_only_defeat_device, True,
            ("context_dependent",)),
)
