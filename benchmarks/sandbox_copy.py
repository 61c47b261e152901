"""Which way of copying a source tree into a fresh workspace is fastest and still safe?

Builds a repo-like tree (default 1,000 files in 100 directories, 1-16 KB each, a few
executables and a symlink), copies it with each strategy several times, and prints the
median wall and CPU time and their ratios to ``shutil.copytree``, all measured in this one run. Each
strategy is also checked for safety (an in-place write to the copy must not reach the
source) and fidelity (executable bits and symlinks preserved).

    PYTHONPATH=src python benchmarks/sandbox_copy.py [--files 1000] [--reps 7] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from verigap.sandbox import materialize


def make_tree(root: Path, n_files: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    per_dir = 10
    for i in range(n_files):
        d = root / f"pkg{i // per_dir // 10}" / f"mod{i // per_dir}"
        d.mkdir(parents=True, exist_ok=True)
        f = d / f"file{i}.py"
        f.write_bytes(rng.randbytes(rng.randint(1024, 16 * 1024)))
        if i % 97 == 0:
            f.chmod(0o755)
    (root / "link_to_first").symlink_to("pkg0/mod0/file0.py")


def cpu_s() -> float:
    """User+system CPU of this process and its waited-for children: steadier than wall
    time on a shared machine, since waiting for other tenants' work is not counted."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


STRATEGIES: dict[str, Callable[[Path, Path], object]] = {
    "shutil.copytree (copy2)": lambda s, d: shutil.copytree(s, d, symlinks=True),
    "shutil.copytree (copyfile)": lambda s, d: shutil.copytree(
        s, d, symlinks=True, copy_function=shutil.copyfile
    ),
    "cp -a": lambda s, d: _run("cp", "-a", str(s), str(d)),
    # what materialize ran before the fast paths
    "cp -a --reflink=auto": lambda s, d: _run("cp", "-a", "--reflink=auto", str(s), str(d)),
    "tar | tar": lambda s, d: (
        d.mkdir(),
        subprocess.run(
            f"tar -C {s} -cf - . | tar -C {d} -xf -", shell=True, check=True, capture_output=True
        ),
    ),
    "verigap.materialize": lambda s, d: materialize(s, d),
    "hardlinks (cp -al)": lambda s, d: _run("cp", "-al", str(s), str(d)),
}


def check(src: Path, dst: Path) -> tuple[bool, bool]:
    """(safe, faithful): in-place write stays in the copy; modes and links preserved."""
    faithful = (
        os.access(dst / "pkg0" / "mod0" / "file0.py", os.X_OK)
        and (dst / "link_to_first").is_symlink()
    )
    target = dst / "pkg0" / "mod0" / "file1.py"
    before = (src / "pkg0" / "mod0" / "file1.py").read_bytes()
    with open(target, "r+b") as fh:
        fh.write(b"EDITED")
    safe = (src / "pkg0" / "mod0" / "file1.py").read_bytes() == before
    if not safe:
        with open(src / "pkg0" / "mod0" / "file1.py", "wb") as fh:
            fh.write(before)
    return safe, faithful


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--dir", default=None, help="where to build the trees (default: $TMPDIR)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="verigap-copy-bench-", dir=args.dir) as tmp:
        src = Path(tmp) / "src"
        make_tree(src, args.files)
        size = sum(f.stat().st_size for f in src.rglob("*") if f.is_file())
        print(f"tree: {args.files} files, {size / 1e6:.1f} MB, {args.reps} reps, median time")
        # Round-robin over strategies so that drift (page cache, writeback, a busy machine)
        # spreads over all of them instead of penalising whichever runs last.
        times: dict[str, list[float]] = {name: [] for name in STRATEGIES}
        cpus: dict[str, list[float]] = {name: [] for name in STRATEGIES}
        flags: dict[str, tuple[bool, bool]] = {}
        for rep in range(args.reps):
            for name, fn in STRATEGIES.items():
                dst = Path(tmp) / "dst"
                t0, c0 = time.perf_counter(), cpu_s()
                fn(src, dst)
                times[name].append(time.perf_counter() - t0)
                cpus[name].append(cpu_s() - c0)
                if rep == 0:
                    flags[name] = check(src, dst)
                shutil.rmtree(dst)
        base = statistics.median(times["shutil.copytree (copy2)"])
        base_cpu = statistics.median(cpus["shutil.copytree (copy2)"])
        print(
            f"{'strategy':28s} {'wall ms':>8s} {'ratio':>6s} {'cpu ms':>7s} {'ratio':>6s}  safe  keeps modes+links"
        )
        for name in STRATEGIES:
            t, c = statistics.median(times[name]), statistics.median(cpus[name])
            safe, faithful = flags[name]
            print(
                f"{name:28s} {t * 1e3:8.1f} {t / base:5.2f}x {c * 1e3:7.1f} {c / base_cpu:5.2f}x"
                f"  {safe!s:5s} {faithful}"
            )
        print(
            f"(ratios to shutil.copytree; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
        )


if __name__ == "__main__":
    main()
