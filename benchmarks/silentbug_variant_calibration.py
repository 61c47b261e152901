"""Would the bank's calibration hold if the substrates changed?

A speed change that moves the floats (``benchmarks/variants/numpy_acting``) can land only if the
bank is calibrated again on it. This runs that calibration without landing anything: every bug
whose patch applies to the variant (``silentbug_ppo.variant_files``) is calibrated on the
variant's own clean, ablated and broken runs, with the same rule and seeds as the committed
calibration, and each verdict is set beside the committed one
(``src/verigap/silentbug/bugs/baselines.json``). Bugs whose patch does not apply to the variant
are listed and not run: they would need their patch made again first.

``calibrate`` reads the pristine package through ``calibrate.pristine_files``; here the variant
stands in for it, so every run's workspace holds the variant's files (and the run cache, keyed
by content, keeps them apart from the pristine runs).

    PYTHONPATH=src python benchmarks/silentbug_variant_calibration.py \\
        --variant benchmarks/variants/numpy_acting --cache-dir /tmp/variant-calibration \\
        --out results/investigations/ppo_numpy_acting_calibration.json
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path
from typing import Any


def _variant_files(variant: Path) -> dict[str, str]:
    spec = importlib.util.spec_from_file_location(
        "silentbug_ppo", Path(__file__).with_name("silentbug_ppo.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.variant_files(variant)


def applicable_bugs(files: dict[str, str]) -> tuple[list[str], list[str]]:
    """(ids of the bugs whose patch applies to ``files``, ids of those whose patch does not)."""
    from verigap.errors import ConfigError
    from verigap.silentbug.bank import broken_files, load_registry

    applies, not_applied = [], []
    for bug in load_registry().bugs:
        try:
            broken_files(bug, files)
            applies.append(bug.id)
        except ConfigError:
            not_applied.append(bug.id)
    return applies, not_applied


def compare(variant_rows: list[dict[str, Any]], committed: dict[str, Any]) -> list[dict[str, Any]]:
    """Each calibrated bug's verdict and gap on the variant beside the committed calibration's."""
    rows = []
    for r in variant_rows:
        old = committed[r["id"]]
        rows.append(
            {
                "id": r["id"],
                "substrate": r["substrate"],
                "committed_verdict": old["verdict"],
                "variant_verdict": r["verdict"],
                "same_verdict": old["verdict"] == r["verdict"],
                "committed_margin": old.get("margin"),
                "variant_margin": r.get("margin"),
                "committed_threshold": old.get("threshold"),
                "variant_threshold": r.get("threshold"),
                "variant_reason": r["reason"],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--variant",
        type=Path,
        required=True,
        help="directory of *.diff files against the substrates package",
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/variant-calibration"))
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--out", type=Path, help="write a results file (with provenance) here")
    args = parser.parse_args()
    from verigap.silentbug import calibrate as calibration

    files = _variant_files(args.variant)
    applies, not_applied = applicable_bugs(files)
    print(f"{len(applies)} bugs apply to {args.variant}; not applied: {not_applied}", flush=True)
    load_before = os.getloadavg()
    calibration.pristine_files = lambda: dict(files)  # the variant stands in for the package
    cal = calibration.calibrate(
        applies, seeds=args.seeds, cache_dir=args.cache_dir, workers=args.workers
    )
    baselines = calibration.read_baselines()
    committed = baselines["bugs"]
    # strict: a refused bug has no gap (NaN in memory, null in results files)
    rows = compare([calibration.strict(r.to_dict()) for r in cal.results], committed)
    clean = {
        name: {
            "committed": baselines["substrates"][name]["clean"],
            "variant": calibration.strict(arm.to_dict()),
        }
        for name, arm in cal.clean.items()
    }
    for name, c in clean.items():
        print(
            f"clean {name}: committed {c['committed']['mean']:.1f} "
            f"(std {c['committed']['std']:.1f}), variant {c['variant']['mean']:.1f} "
            f"(std {c['variant']['std']:.1f})"
        )
    changed = [r["id"] for r in rows if not r["same_verdict"]]
    for r in rows:
        print(
            f"{r['id']:40s} committed {r['committed_verdict']:9s} variant "
            f"{r['variant_verdict']:9s}{'' if r['same_verdict'] else '  <- changed'}"
        )
    print(f"\n{len(rows) - len(changed)} of {len(rows)} verdicts unchanged; changed: {changed}")
    if args.out:
        from verigap.results import write_result

        timing = cal.to_dict().get("timing", {})
        write_result(
            args.out,
            {
                "variant": str(args.variant),
                "seeds": args.seeds,
                "rows": rows,
                "clean": clean,
                "calibrated": len(rows),
                "same_verdicts": len(rows) - len(changed),
                "changed": changed,
                "not_applied": not_applied,
                "runs_total": cal.runs_total,
                "runs_cpu_s": timing.get("runs_cpu_s"),
                "wall_s": cal.wall_s,
                "loadavg_before": list(load_before),
                "loadavg_after": list(os.getloadavg()),
            },
            command=f"PYTHONPATH=src python benchmarks/silentbug_variant_calibration.py "
            f"--variant {args.variant} --seeds {args.seeds} "
            f"--cache-dir {args.cache_dir} --out {args.out}",
        )


if __name__ == "__main__":
    main()
