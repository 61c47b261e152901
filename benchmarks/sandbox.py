"""Workspace creation time and per-command sandbox overhead, measured in one run.

1. Creating a workspace from a ~1,000-file tree: ``materialize`` alone, and
   ``materialize`` + ``make_sandbox`` (which, as root, hands the files to the sandbox
   user and probes bubblewrap once).
2. Per-command cost of ``true`` and ``python -c pass``: a bare ``subprocess.run``, the
   unsafe backend (limits wrapper, capture loop) and the bubblewrap backend. Ratios are to
   the bare subprocess measured in this same run.

    PYTHONPATH=src python benchmarks/sandbox.py [--files 1000] [--reps 20] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sandbox_copy import make_tree  # noqa: E402

from verigap.sandbox import (  # noqa: E402
    Limits,
    UnsafeSandboxWarning,
    make_sandbox,
    materialize,
)


def measure(fn: Callable[[], object], reps: int) -> tuple[float, float]:
    """Median and minimum wall ms of ``fn``. On a shared machine the minimum is the better
    estimate of the intrinsic cost; the median shows what a loaded machine adds. (CPU time
    is no help here: work inside bubblewrap's PID namespace is not charged to us.)"""
    walls = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls) * 1e3, min(walls) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--dir", default=None, help="where to build the trees (default: $TMPDIR)")
    args = ap.parse_args()
    have_bwrap = shutil.which("bwrap") is not None
    warnings.simplefilter("ignore", UnsafeSandboxWarning)
    with tempfile.TemporaryDirectory(prefix="verigap-sandbox-bench-", dir=args.dir) as tmp:
        src = Path(tmp) / "src"
        make_tree(src, args.files)
        counter = iter(range(10**6))

        def fresh() -> Path:
            return materialize(src, Path(tmp) / f"ws{next(counter)}")

        reps_ws = max(3, args.reps // 4)
        fresh()  # warm-up: page cache, first-call costs
        # Alternate the two measurements so machine drift hits both equally.
        rows: dict[str, list[float]] = {"materialize": [], "materialize + make_sandbox(bwrap)": []}
        for _ in range(reps_ws):
            rows["materialize"].append(measure(fresh, 1)[0])
            if have_bwrap:
                rows["materialize + make_sandbox(bwrap)"].append(
                    measure(lambda: make_sandbox(fresh(), backend="bwrap"), 1)[0]
                )
        print(f"workspace from {args.files} files ({reps_ws} reps):   median ms      min ms")
        for name, ts in rows.items():
            if ts:
                print(f"  {name:34s} {statistics.median(ts):9.1f} {min(ts):11.1f}")

        ws = fresh()
        boxes = {"unsafe": make_sandbox(ws, backend="unsafe", limits=Limits())}
        if have_bwrap:
            boxes["bwrap"] = make_sandbox(ws, backend="bwrap", limits=Limits())
        py = str(Path(sys.base_prefix) / "bin" / "python3")
        print(f"\nper command ({args.reps} reps):")
        print(
            f"  {'command':16s} {'runner':7s} {'median ms':>10s} {'ratio':>7s} {'min ms':>8s} {'ratio':>7s}"
        )
        for label, argv in [("true", ["true"]), ("python -c pass", [py, "-c", "pass"])]:
            res = {
                "bare": measure(lambda a=argv: subprocess.run(a, capture_output=True), args.reps)
            }
            for name, box in boxes.items():
                res[name] = measure(lambda b=box, a=argv: b.exec(a), args.reps)
            bmed, bmin = res["bare"]
            for name, (med, lo) in res.items():
                print(
                    f"  {label:16s} {name:7s} {med:10.1f} {med / bmed:6.2f}x {lo:8.1f} {lo / bmin:6.2f}x"
                )
        print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
        if not have_bwrap:
            print("\n(bwrap not installed: bubblewrap rows skipped)")


if __name__ == "__main__":
    main()
