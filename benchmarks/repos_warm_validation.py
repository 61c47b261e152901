"""What the warm validation workers save: each mutation validated cold and warm, in turn.

    nice -n 10 python benchmarks/repos_warm_validation.py inflection==0.5.1 [--n 16]
        [--out results/repos/warm_validation.json]

Prepares the project (or reuses the cache), takes the first ``--n`` candidates make-tasks would
validate (seed 0), and validates each twice, alternately: in a fresh bubblewrap sandbox (the
cold path: interpreter start and pytest import per mutation) and in one warm fork server
(``verigap.repos.warm``), bypassing the validation cache. Alternating keeps the two paths
under the same machine load. Records the seconds of each, their totals and whether every
verdict (valid or not, why, the tests broken, the crash type) is the same.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from verigap.repos.prepare import prepare
from verigap.repos.validate import candidates, validate_one
from verigap.repos.warm import WarmRunner
from verigap.results import write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--out", type=Path, default=Path("results/repos/warm_validation.json"))
    args = ap.parse_args()
    command = "python benchmarks/repos_warm_validation.py " + " ".join(
        shlex.quote(a) for a in sys.argv[1:]
    )
    p = prepare(args.spec)
    muts = candidates(p, max_candidates=args.n, seed=0)
    rows = []
    warm = WarmRunner(p)
    try:
        for m in muts:
            t0 = time.perf_counter()
            cold = validate_one(p, m, "bwrap")
            t1 = time.perf_counter()
            hot = validate_one(p, m, "bwrap", warm)
            t2 = time.perf_counter()

            def key(v):
                return (v[0].model_dump() if v[0] else None, v[1])

            rows.append(
                {
                    "mutation": m.id,
                    "cold_s": round(t1 - t0, 3),
                    "warm_s": round(t2 - t1, 3),
                    "verdict": cold[1] or "valid",
                    "same": key(cold) == key(hot),
                }
            )
            print(rows[-1], flush=True)
    finally:
        warm.close()
    cold_s = sum(r["cold_s"] for r in rows)
    warm_s = sum(r["warm_s"] for r in rows)
    write_result(
        args.out,
        {
            "spec": args.spec,
            "suite_s": p.baseline_s,
            "mutations": len(rows),
            "same_verdicts": sum(r["same"] for r in rows),
            "cold_s": round(cold_s, 1),
            "warm_s": round(warm_s, 1),
            "warm_over_cold": round(warm_s / cold_s, 3) if cold_s else None,
            "rows": rows,
        },
        command=command,
    )
    print(f"cold {cold_s:.1f}s warm {warm_s:.1f}s same {sum(r['same'] for r in rows)}/{len(rows)}")


if __name__ == "__main__":
    main()
