"""How the sites of a project are told apart out of the candidate's process, methods apart.

    nice -n 15 python benchmarks/repos_site_routes.py [--spec cachetools==5.3.3]
        [--max-candidates 80] [--out results/repos/site_routes_cachetools.json]

For every function with a valid mutation among make-tasks' candidates (seed 0): whether its
equivalence inputs were captured with plain ``pickle``, needed ``cloudpickle`` (a lambda, a
closure or a class defined in a test, often inside a method's receiver), or none could be
kept, and then whether its tests can be carried through the sealed channel instead
(``forward.carries`` with its first valid mutation). Methods of classes and plain functions are
counted apart. Needs the project prepared (``verigap repos prepare SPEC``) and bubblewrap.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from verigap.repos import forward
from verigap.repos.prepare import prepare
from verigap.repos.tasks import collect_inputs
from verigap.repos.validate import candidates, mutant_tree, validate
from verigap.results import write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="cachetools==5.3.3")
    ap.add_argument("--max-candidates", type=int, default=80)
    ap.add_argument("--out", type=Path, default=Path("results/repos/site_routes_cachetools.json"))
    args = ap.parse_args()
    command = "python benchmarks/repos_site_routes.py " + " ".join(
        shlex.quote(a) for a in sys.argv[1:]
    )
    p = prepare(args.spec)
    valid, _ = validate(p, candidates(p, max_candidates=args.max_candidates, seed=0))
    first: dict[str, object] = {}
    for v in valid:
        first.setdefault(v.function, v)
    why: dict[str, str] = {}
    pickled: dict[str, str] = {}
    inputs = collect_inputs(p, sorted(first), why=why, pickled=pickled, cloudpickle=True)
    rows = []
    for f, v in sorted(first.items()):
        route = pickled.get(f) if inputs.get(f) else None
        carried = None
        if route is None:
            with tempfile.TemporaryDirectory(prefix="vg-routes-") as tmp:
                mutant_tree(p, [v.mutation], Path(tmp) / "t")
                reason = forward.carries(p, [v], Path(tmp) / "t")
            carried = reason is None
            route = "sealed channel" if carried else "none"
        rows.append(
            {
                "function": f,
                "method": "." in v.qualname,
                "route": route,
                "inputs": len(inputs.get(f, [])),
                "no_input_reason": why.get(f),
            }
        )
        print(rows[-1], flush=True)
    summary: dict[str, dict[str, int]] = {"methods": {}, "functions": {}}
    for r in rows:
        kind = summary["methods" if r["method"] else "functions"]
        kind[r["route"]] = kind.get(r["route"], 0) + 1
    data = {
        "spec": args.spec,
        "functions_with_valid_mutations": len(rows),
        "routes": summary,
        "rows": rows,
    }
    write_result(args.out, data, command=command)
    print(summary)


if __name__ == "__main__":
    main()
