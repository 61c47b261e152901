"""Which real sites the sealed channel can carry: ``forward.carries`` on every valid mutation.

    python benchmarks/repos_carries.py SPEC [--max-candidates 24] [--seed 0] [--env venv]
        [--functions FILE::QUALNAME ...] [--out results/redteam/v2_carries_toolz.json]

A ``tests_only`` site (no equivalence input) is kept by ``make-tasks --allow-tests-only`` only
if the channel (``repos/forward.py``) carries it: its tests pass through the channel with the
reference as the candidate and fail with the mutant. This asks that question of every valid,
non-crashing mutation make-tasks would sample from ``SPEC`` (one per function, the first
sampled), each alone, and records the answer, the reason when it is no, and whether the
function has equivalence inputs (``collect_inputs``, as make-tasks computes them): the sites
without inputs are the ones that would be ``tests_only``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

from verigap.repos import forward
from verigap.repos.prepare import prepare
from verigap.repos.tasks import collect_inputs
from verigap.repos.validate import candidates, mutant_tree, validate
from verigap.results import write_result


def _reason_class(why: str | None) -> str:
    """A short class for a carries() answer, so the reasons can be counted."""
    if why is None:
        return "carried"
    if "fail on the reference" in why:
        return "fails on the reference through the channel"
    if "does not reach" in why:
        return "mutation not seen through the channel"
    if "not a plain function" in why:
        return "not a plain function"
    return why[:80]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--max-candidates", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--env", default="venv")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--functions",
        nargs="*",
        default=None,
        help="only these functions (file::qualname), e.g. make-tasks' no-input ones",
    )
    ap.add_argument("--command", default=None, help="the command recorded in the results file")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    backend = os.environ.get("VERIGAP_SANDBOX", "bwrap")
    p = prepare(args.spec, env=args.env, backend=backend)
    valid, _ = validate(
        p, candidates(p, max_candidates=args.max_candidates, seed=args.seed), backend=backend
    )
    first: dict[str, object] = {}
    for v in valid:
        first.setdefault(v.function, v)
    sites = [first[f] for f in sorted(first) if not args.functions or f in args.functions]
    no_input: dict[str, str] = {}
    inputs = collect_inputs(p, [s.function for s in sites], backend=backend, why=no_input)
    rows = []
    for s in sites:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="vg-carries-") as tmp:
            base = Path(tmp) / "t"
            mutant_tree(p, [s.mutation], base)
            why = forward.carries(p, [s], base, backend=backend)
        row = {
            "function": s.function,
            "op": s.op,
            "tests": len(s.fail_to_pass),
            "equivalence_inputs": len(inputs.get(s.function, [])),
            "no_input_why": no_input.get(s.function),
            "carried": why is None,
            "why": why,
            "reason": _reason_class(why),
            "seconds": round(time.perf_counter() - t0, 2),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        }
        rows.append(row)
        print(
            f"{s.function:60s} inputs={row['equivalence_inputs']:4d} "
            f"carried={row['carried']} {why or ''}",
            flush=True,
        )
    uncovered = [r for r in rows if not r["equivalence_inputs"]]
    data = {
        "spec": args.spec,
        "sites": len(rows),
        "carried": sum(r["carried"] for r in rows),
        "with_inputs": len(rows) - len(uncovered),
        "without_inputs": len(uncovered),
        "without_inputs_carried": sum(r["carried"] for r in uncovered),
        "reasons": dict(Counter(r["reason"] for r in rows).most_common()),
        "rows": rows,
        "backend": backend,
    }
    data["carried_share"] = round(data["carried"] / len(rows), 3) if rows else None
    print(
        f"{args.spec}: {data['carried']}/{len(rows)} sites carried; "
        f"{data['without_inputs']} without equivalence inputs, "
        f"{data['without_inputs_carried']} of them carried; {data['reasons']}"
    )
    cmd = args.command or (
        f"python benchmarks/repos_carries.py {args.spec} --max-candidates "
        f"{args.max_candidates} --seed {args.seed} --env {args.env} "
        + (f"--functions {' '.join(args.functions)} " if args.functions else "")
        + f"--out {args.out}"
    )
    write_result(args.out, data, command=cmd)
    print(args.out)


if __name__ == "__main__":
    main()
