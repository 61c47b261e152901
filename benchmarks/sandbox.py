"""Workspace creation time and per-command sandbox overhead, measured in one run.

1. Creating a workspace from a ~1,000-file tree: ``materialize`` alone, and
   ``materialize`` + ``make_sandbox`` (which, as root, hands the files to the sandbox
   user and probes bubblewrap once).
2. Per-command cost of ``true`` and ``python -c pass``: a bare ``subprocess.run``, the
   unsafe backend (limits wrapper, capture loop) and the bubblewrap backend. Ratios are to
   the bare subprocess measured in this same run.

    PYTHONPATH=src python benchmarks/sandbox.py [--files 1000] [--reps 20]
"""

from __future__ import annotations

import argparse
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


def median_ms(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    have_bwrap = shutil.which("bwrap") is not None
    warnings.simplefilter("ignore", UnsafeSandboxWarning)
    with tempfile.TemporaryDirectory(prefix="verigap-sandbox-bench-") as tmp:
        src = Path(tmp) / "src"
        make_tree(src, args.files)
        counter = iter(range(10**6))

        def fresh() -> Path:
            return materialize(src, Path(tmp) / f"ws{next(counter)}")

        reps_ws = max(3, args.reps // 4)
        fresh()  # warm-up: page cache, first-call costs
        # Alternate the two measurements so machine drift hits both equally.
        plain: list[float] = []
        boxed: list[float] = []
        for _ in range(reps_ws):
            plain.append(median_ms(fresh, 1))
            if have_bwrap:
                boxed.append(median_ms(lambda: make_sandbox(fresh(), backend="bwrap"), 1))
        print(f"workspace from {args.files} files (median of {reps_ws}):")
        print(f"  materialize                       {statistics.median(plain):8.1f} ms")
        if boxed:
            print(f"  materialize + make_sandbox(bwrap) {statistics.median(boxed):8.1f} ms")

        ws = fresh()
        boxes = {"unsafe": make_sandbox(ws, backend="unsafe", limits=Limits())}
        if have_bwrap:
            boxes["bwrap"] = make_sandbox(ws, backend="bwrap", limits=Limits())
        py = str(Path(sys.base_prefix) / "bin" / "python3")
        print(f"\nper command (median of {args.reps}):")
        print(f"  {'command':22s} {'runner':8s} {'ms':>8s} {'vs bare':>8s}")
        for label, argv in [("true", ["true"]), ("python -c pass", [py, "-c", "pass"])]:
            bare = median_ms(lambda a=argv: subprocess.run(a, capture_output=True), args.reps)
            print(f"  {label:22s} {'bare':8s} {bare:8.1f} {1.0:7.2f}x")
            for name, box in boxes.items():
                t = median_ms(lambda b=box, a=argv: b.exec(a), args.reps)
                print(f"  {label:22s} {name:8s} {t:8.1f} {t / bare:7.2f}x")
        if not have_bwrap:
            print("\n(bwrap not installed: bubblewrap rows skipped)")


if __name__ == "__main__":
    main()
