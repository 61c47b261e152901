"""What running only the tests that reach a mutated function saves in mutation validation.

    nice -n 15 python benchmarks/repos_validation_reach.py [--spec toolz==1.0.0] [--n 12]
        [--out results/repos/validation_reach_toolz.json]

For the first ``--n`` candidate mutations make-tasks would draw (seed 0) on a prepared project,
the mutant tree is run twice, alternating the order: the whole suite (what validation did
before) and the test functions that reach the mutated function (``validate.run_reaching``).
Reported: the wall seconds of each, their ratio (measured in the same process, on the same
trees, so machine load moves both), and whether the two runs reach the same decision (valid or
not and, when valid, the same broken tests). Needs the project
prepared (``verigap repos prepare SPEC``) and bubblewrap.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from pathlib import Path

from verigap.repos.prepare import prepare
from verigap.repos.validate import candidates, mutant_tree, run_reaching, run_suite


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="toolz==1.0.0")
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--out", type=Path, default=Path("results/repos/validation_reach_toolz.json"))
    args = ap.parse_args()
    command = "python benchmarks/repos_validation_reach.py " + " ".join(
        shlex.quote(a) for a in sys.argv[1:]
    )
    p = prepare(args.spec)
    rows = []
    for i, m in enumerate(candidates(p, max_candidates=args.n, seed=0)):
        with tempfile.TemporaryDirectory(prefix="vg-reach-") as tmp:
            tree = Path(tmp) / "t"
            mutant_tree(p, [m], tree)
            times: dict[str, float] = {}
            runs = {}
            for which in ("full", "reach") if i % 2 == 0 else ("reach", "full"):
                t0 = time.perf_counter()
                if which == "full":
                    runs[which] = (run_suite(p, tree), list(p.passing))
                else:
                    runs[which] = run_reaching(p, tree, m.function)
                times[which] = time.perf_counter() - t0
        (full, _), (reach, ran) = runs["full"], runs["reach"]
        broken_full = full.failing(p.passing) if full.report_found else None
        broken_reach = reach.failing(ran) if reach.report_found else None
        reach_set = set(p.reach.get(m.function, ()))

        def valid(broken: set[str] | None, reach: set[str] = reach_set) -> bool:
            return bool(broken) and broken <= reach  # validate_one's decision on them

        same = (
            broken_full is not None
            and broken_reach is not None
            and valid(broken_full) == valid(broken_reach)
            and (not valid(broken_full) or broken_full == broken_reach)
        )
        rows.append(
            {
                "mutation": m.id,
                "tests_run": len(ran),
                "full_s": round(times["full"], 3),
                "reach_s": round(times["reach"], 3),
                "same_decision": same,
            }
        )
        print(rows[-1], flush=True)
    full_s = sum(r["full_s"] for r in rows)
    reach_s = sum(r["reach_s"] for r in rows)
    data = {
        "spec": args.spec,
        "mutations": len(rows),
        "passing_tests": len(p.passing),
        "mean_tests_run": round(sum(r["tests_run"] for r in rows) / len(rows), 1),
        "full_s": round(full_s, 2),
        "reach_s": round(reach_s, 2),
        "speedup": round(full_s / reach_s, 2),
        "same_decision": sum(r["same_decision"] for r in rows),
        "rows": rows,
    }
    from verigap.results import write_result

    write_result(args.out, data, command=command)
    print({k: v for k, v in data.items() if k != "rows"})


if __name__ == "__main__":
    main()
