"""Per-command sandbox overhead and workspace creation, each against its baseline in one run.

1. Per command (``true`` and ``python -c pass``): a bare ``subprocess.run``, the bubblewrap
   backend with its launcher (util-linux ``setpriv``/``prlimit``), the bubblewrap backend
   forced onto the Python limits wrapper it used before, a persistent bubblewrap sandbox
   (``persistent=True``: one sandbox, a command server inside), and the unsafe backend. The
   runners are interleaved (bare, bwrap, bwrap-python, unsafe, bare, ...) so that machine
   drift hits all of them alike. "Added" is the per-round difference to the bare run of
   the same round (median over rounds), so a loaded stretch of the run cancels out.
   ``bwrap_prestarted``: a sandbox from a ``SandboxPool`` (started ahead, one command, torn
   down after), timed from the request (``take``) to the result; the pool's teardown of the
   used sandbox and start of the next run in the background, and are timed apart
   (``prestarted_settle_between_commands``) so that they overlap no other row.
   ``grading_on_demand`` / ``grading_prestarted``: a graded command as ``repos.execution``
   runs it (its scratch directory made and deleted, the running environment and the harness
   mounted at their fixed paths, grading's limits), on demand as before and from the pool
   ``execution.scratch`` keeps for its mount set; ``saved_vs_on_demand_wall_median_ms`` is
   their per-round difference. In ``python_c_pass`` both run the environment's own Python
   (``/verigap/env/bin/python``), not the base one the other rows run.
2. Workspace creation from a ~1,000-file tree (``materialize`` + ``make_sandbox``): "now"
   against "before" (the previous implementation: ``cp -a`` and a pathlib walk to hand the
   files to the sandbox uid), the copy alone, and "pool" (``WorkspacePool.take`` of a
   ready-made copy by rename, then ``make_sandbox``), interleaved the same way. The pool
   refills between rounds, timed apart (``pool_refill_between_takes``): its copying is moved
   off the waiting path, not saved. ``pool_for_sandbox``: the same from a pool made with
   ``for_sandbox=True`` (``take_sandbox``: the copy is handed to its sandbox uid in the
   background too, so no ``lchown`` walk is left to wait for), refilled and timed apart the
   same way. ``delete_rmtree`` / ``delete_discard``: removing a
   workspace by ``shutil.rmtree`` against ``discard`` (rename, deleted in the background).

Row names: ``bwrap`` (a sandbox per command, setpriv/prlimit launcher),
``bwrap_prestarted`` (a sandbox per command, started ahead by ``SandboxPool``),
``bwrap_env_launcher`` (the same with ``env --default-signal`` always in the chain, as
before it became conditional),
``bwrap_python_wrapper`` (the same forced onto the Python limits wrapper used before issue
19), ``bwrap_persistent`` (``persistent=True``), ``bwrap_floor`` (bubblewrap alone with the
backend's namespaces, /proc, /dev and /tmp over a read-only root: the least any fresh sandbox of
this kind costs here, see ``BWRAP_FLOOR``), ``unsafe``; commands ``true`` and ``python_c_pass``.

Commands are timed by wall clock only: CPU time would miss what ran inside the sandbox
(bubblewrap's launcher exits without reaping the sandbox's init). Workspaces also get the
CPU time of this process and its children, steadier on a shared machine. Writes
``results/sandbox/command_overhead.json`` and ``results/sandbox/workspace.json`` with the
load average before and after.

    PYTHONPATH=src python benchmarks/sandbox.py [--files 1000] [--reps 30] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sandbox_copy import make_tree  # noqa: E402

from verigap.repos import execution  # noqa: E402
from verigap.repos.pytest_run import harness_dir  # noqa: E402
from verigap.results import write_result  # noqa: E402
from verigap.sandbox import (  # noqa: E402
    Limits,
    SandboxPool,
    UnsafeSandboxWarning,
    WorkspacePool,
    _bwrap,
    _limits,
    discard,
    make_sandbox,
    materialize,
    wait_discarded,
)

GOAL_ADDED_MS = 10.0  # goal: a sandboxed command adds at most this over running it bare
GOAL_WORKSPACE_MS = 50.0  # goal: workspace creation on disk


def cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one call."""
    c0, t0 = cpu_s(), time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3, (cpu_s() - c0) * 1e3


@contextlib.contextmanager
def python_wrapper_launcher() -> Iterator[None]:
    """Make the backends use the Python limits wrapper (the launcher before the fast paths)."""
    with mock.patch.object(_limits, "native_launcher", lambda visible=None: None):
        yield


@contextlib.contextmanager
def env_launcher() -> Iterator[None]:
    """Keep ``env --default-signal`` in the launcher chain, as before it became conditional
    (one exec more per command; now only used where the host ignores a signal)."""
    with mock.patch.object(_limits, "inherited_ignored_signals", lambda: True):
        yield


def _old_chown(root: Path, uid: int) -> None:
    """How make_sandbox handed the workspace to the sandbox uid before the fast paths."""
    out = [root]
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        out += [Path(dirpath, n) for n in (*dirnames, *filenames)]
    for p in out:
        os.chown(p, uid, uid, follow_symlinks=False)


def summarize(walls: list[float], cpus: list[float] | None = None) -> dict[str, float]:
    row = {
        "wall_median_ms": round(statistics.median(walls), 2),
        "wall_min_ms": round(min(walls), 2),
    }
    if cpus is not None:
        row["cpu_median_ms"] = round(statistics.median(cpus), 2)
    return row


def settle_grading() -> None:
    """Wait for grading's pools to tear down used sandboxes and start the next (timed apart
    from every row, as the ``SandboxPool`` row's)."""
    for p in list(execution._POOLS.pools.values()):
        p.wait_ready(timeout=600)


# The least a fresh sandbox of the backend's kind costs on this machine: bubblewrap with the
# root bound read-only, the namespaces the backend unshares, /proc, /dev and a /tmp, and nothing
# else (no launcher, no per-path mounts, no identity files, no read-only seal). What a fresh
# ``bwrap`` row adds beyond this row is verigap's; this row itself is the kernel's and bubblewrap's.
BWRAP_FLOOR = [
    "bwrap",
    "--ro-bind",
    "/",
    "/",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--unshare-net",
    *([] if os.geteuid() == 0 else ["--unshare-user"]),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    "--die-with-parent",
    "--new-session",
    "--",
]


def bench_commands(ws: Path, reps: int, have_bwrap: bool, tmp: Path) -> dict:
    py = str(Path(sys.base_prefix) / "bin" / "python3")
    boxes: dict[str, Callable[[list[str]], object]] = {
        "bare": lambda a: subprocess.run(a, capture_output=True),
    }
    if have_bwrap:
        bw = make_sandbox(ws, backend="bwrap", limits=Limits())
        boxes["bwrap"] = lambda a: bw.exec(a)

        def bwrap_python(a: list[str]) -> object:
            with python_wrapper_launcher():
                return bw.exec(a)

        boxes["bwrap_python_wrapper"] = bwrap_python

        def bwrap_env(a: list[str]) -> object:
            with env_launcher():
                return bw.exec(a)

        boxes["bwrap_env_launcher"] = bwrap_env
        boxes["bwrap_floor"] = lambda a: subprocess.run([*BWRAP_FLOOR, *a], capture_output=True)
        session = make_sandbox(ws, backend="bwrap", limits=Limits(), persistent=True)
        boxes["bwrap_persistent"] = lambda a: session.exec(a)
        pool = SandboxPool(tmp / "sandbox-pool", size=2, limits=Limits())
        taken = iter(range(10**6))

        def prestarted(a: list[str]) -> object:  # request -> result: take, then its command
            return pool.take(tmp / "prestarted" / f"ws{next(taken)}").exec(a)

        boxes["bwrap_prestarted"] = prestarted
        # a graded command as ``repos.execution`` runs it (a scratch directory, the prepared
        # environment and the harness at their fixed paths, grading's limits): on demand, as
        # before, and from the sandbox started ahead for its mount set (``execution.scratch``)
        gm = execution.Mounts(
            {Path(sys.prefix): execution.ENV_MOUNT, harness_dir(): execution.HARNESS_MOUNT}, "bwrap"
        )

        env_py = gm.inside(sys.executable)

        def grading_on_demand(a: list[str]) -> object:
            a = [env_py, *a[1:]] if a[0] == py else a
            with tempfile.TemporaryDirectory(prefix="vg-bench-") as s:
                return execution.run(a, scratch=Path(s), mounts=gm, timeout=60.0)

        def grading_prestarted(a: list[str]) -> object:
            a = [env_py, *a[1:]] if a[0] == py else a
            with execution.scratch(gm, timeout=60.0, prefix="vg-bench-") as s:
                return execution.run(a, scratch=s, mounts=gm, timeout=60.0)

        boxes["grading_on_demand"] = grading_on_demand
        boxes["grading_prestarted"] = grading_prestarted
        for _ in range(execution.POOL_AFTER):  # the mount set recurs: its pool opens
            grading_prestarted(["true"])
    unsafe = make_sandbox(ws, backend="unsafe", limits=Limits())
    boxes["unsafe"] = lambda a: unsafe.exec(a)
    out: dict = {}
    settle: dict[str, list[float]] = {"wall": [], "cpu": []}
    for label, argv in [("true", ["true"]), ("python_c_pass", [py, "-c", "pass"])]:
        for name, run in boxes.items():  # warm-up: page cache, first-call costs
            res = run(argv)
            if name.startswith("grading") and not res.ok:  # type: ignore[attr-defined]
                raise SystemExit(f"{name} {argv}: the command failed: {res}")
        if have_bwrap:
            pool.wait_ready(timeout=600)
            settle_grading()
        walls: dict[str, list[float]] = {k: [] for k in boxes}
        for _ in range(reps):
            for name, run in boxes.items():
                walls[name].append(timed(lambda r=run, a=argv: r(a))[0])
                if name == "bwrap_prestarted":  # its background work, kept out of every row
                    w, c = timed(lambda: pool.wait_ready(timeout=600))
                    settle["wall"].append(w)
                    settle["cpu"].append(c)
                if name == "grading_prestarted":
                    settle_grading()
        rows = {}
        for name in boxes:
            row = summarize(walls[name])
            if name != "bare":
                pairs = zip(walls[name], walls["bare"], strict=True)
                row["added_wall_median_ms"] = round(statistics.median(a - b for a, b in pairs), 2)
                row["added_wall_min_ms"] = round(min(walls[name]) - min(walls["bare"]), 2)
            rows[name] = row
        if "grading_prestarted" in walls:  # the same graded command, on demand and ahead
            pairs = zip(walls["grading_on_demand"], walls["grading_prestarted"], strict=True)
            rows["grading_prestarted"]["saved_vs_on_demand_wall_median_ms"] = round(
                statistics.median(a - b for a, b in pairs), 2
            )
        out[label] = rows
    if have_bwrap:
        out["grading_pools"] = {
            "taken": sum(p.stats.taken for p in execution._POOLS.pools.values()),
            "pools": len(execution._POOLS.pools),
        }
        execution.close_pools()
        out["prestarted_settle_between_commands"] = summarize(settle["wall"], settle["cpu"])
        out["prestarted_pool"] = {
            "taken": pool.stats.taken,
            "started_on_the_spot": pool.stats.started_on_the_spot,
        }
        pool.close()
        session.close()
    if have_bwrap and _limits.native_launcher() is not None:
        out["launcher_chain_alone"] = bench_launcher_chain(bw.uid, reps)
    return out


def bench_launcher_chain(uid: int | None, reps: int) -> dict:
    """The launcher chain run on the host, outside any sandbox, with and without ``env
    --default-signal``: the programs exec one another in one child process, so its CPU
    time (which the sandbox rows cannot see: bubblewrap does not reap the sandbox's init)
    counts all of it, and CPU time is steady under load where wall time is not."""
    chains = {
        "with_env": _limits.native_argv(["true"], Limits(), uid=uid, reset_signals=True),
        "without_env": _limits.native_argv(["true"], Limits(), uid=uid, reset_signals=False),
        "bare_true": ["true"],
    }

    def kids_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    walls: dict[str, list[float]] = {k: [] for k in chains}
    cpus: dict[str, list[float]] = {k: [] for k in chains}
    for _ in range(reps * 3):
        for name, argv in chains.items():
            c0, t0 = kids_cpu(), time.perf_counter()
            subprocess.run(argv, capture_output=True)  # type: ignore[arg-type]
            walls[name].append((time.perf_counter() - t0) * 1e3)
            cpus[name].append((kids_cpu() - c0) * 1e3)
    rows = {name: summarize(walls[name], cpus[name]) for name in chains}
    for name in chains:
        rows[name]["cpu_mean_ms"] = round(statistics.mean(cpus[name]), 3)
    return rows


def bench_workspace(src: Path, tmp: Path, reps: int, have_bwrap: bool) -> dict:
    counter = iter(range(10**6))
    backend = "bwrap" if have_bwrap else "unsafe"

    def new() -> None:
        make_sandbox(materialize(src, tmp / f"ws{next(counter)}"), backend=backend)

    def old() -> None:
        dest = tmp / f"ws{next(counter)}"
        subprocess.run(["cp", "-a", "--reflink=auto", "--", str(src), str(dest)], check=True)
        with mock.patch.object(_bwrap, "_chown_tree", _old_chown):
            make_sandbox(dest, backend=backend)

    def copy_only() -> None:  # "materialize_only": the copy without make_sandbox
        materialize(src, tmp / f"ws{next(counter)}")

    pool = WorkspacePool(src, tmp / "pool", size=2)

    def pooled() -> None:  # "pool": a ready copy taken by rename, then make_sandbox
        make_sandbox(pool.take(tmp / f"ws{next(counter)}"), backend=backend)

    owned = WorkspacePool(src, tmp / "owned-pool", size=2, for_sandbox=True)

    def pooled_owned() -> None:  # a ready copy its sandbox uid already owns
        owned.take_sandbox(tmp / f"ws{next(counter)}", backend=backend)

    runs = {
        "before": old,
        "now": new,
        "materialize_only": copy_only,
        "pool": pooled,
        "pool_for_sandbox": pooled_owned,
    }
    refill: dict[str, list[float]] = {"wall": [], "cpu": []}
    refill_owned: dict[str, list[float]] = {"wall": [], "cpu": []}
    deleted: dict[str, list[float]] = {"rmtree": [], "discard": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeSandboxWarning)
        for fn in runs.values():
            fn()  # warm-up (bubblewrap is probed once per process)
        pool.wait_ready(timeout=600)
        owned.wait_ready(timeout=600)
        walls: dict[str, list[float]] = {k: [] for k in runs}
        cpus: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(reps):
            for name, fn in runs.items():
                w, c = timed(fn)
                walls[name].append(w)
                cpus[name].append(c)
                # a pool refills after its take, timed on its own (as an episode's minutes
                # would hide it), so that its copying overlaps no other row's measurement
                for row, p, into in (
                    ("pool", pool, refill),
                    ("pool_for_sandbox", owned, refill_owned),
                ):
                    if name == row:
                        w, c = timed(lambda p=p: p.wait_ready(timeout=600))
                        into["wall"].append(w)
                        into["cpu"].append(c)
            # deleting a workspace: on the waiting path (rmtree) and behind it (discard)
            a, b = (tmp / f"ws{next(counter)}" for _ in range(2))
            materialize(src, a)
            materialize(src, b)
            deleted["rmtree"].append(timed(lambda a=a: shutil.rmtree(a))[0])
            deleted["discard"].append(timed(lambda b=b: discard(b))[0])
            wait_discarded(timeout=600)
    stats, stats_owned = pool.stats, owned.stats
    pool.close()
    owned.close()
    rows = {name: summarize(walls[name], cpus[name]) for name in runs}
    for name in runs:
        pairs = zip(walls[name], walls["before"], strict=True)
        rows[name]["ratio_to_before_wall_median"] = round(
            statistics.median(a / b for a, b in pairs), 3
        )
    rows["pool"]["copied_on_the_spot"] = stats.copied_on_the_spot
    rows["pool"]["taken"] = stats.taken
    rows["pool_for_sandbox"]["copied_on_the_spot"] = stats_owned.copied_on_the_spot
    rows["pool_for_sandbox"]["taken"] = stats_owned.taken
    rows["pool_refill_between_takes"] = summarize(refill["wall"], refill["cpu"])
    rows["pool_for_sandbox_refill_between_takes"] = summarize(
        refill_owned["wall"], refill_owned["cpu"]
    )
    rows["delete_rmtree"] = summarize(deleted["rmtree"])
    rows["delete_discard"] = summarize(deleted["discard"])
    return rows


def fs_type(path: Path) -> str:
    done = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=30, help="rounds per command (workspace: /3)")
    ap.add_argument("--dir", default=None, help="where to build the trees (default: $TMPDIR)")
    ap.add_argument("--out", default="results/sandbox", help="results directory")
    args = ap.parse_args()
    have_bwrap = shutil.which("bwrap") is not None
    command = "PYTHONPATH=src python benchmarks/sandbox.py " + " ".join(sys.argv[1:])
    meta = {
        "cpus": os.cpu_count(),
        "euid": os.geteuid(),
        "bwrap": have_bwrap,
        # True: the "bwrap" row also runs env --default-signal (started in the background)
        "host_ignores_signals": _limits.inherited_ignored_signals(),
    }
    warnings.simplefilter("ignore", UnsafeSandboxWarning)
    with tempfile.TemporaryDirectory(prefix="verigap-sandbox-bench-", dir=args.dir) as tmp_s:
        tmp = Path(tmp_s)
        src = tmp / "src"
        make_tree(src, args.files)
        meta["filesystem"] = fs_type(tmp)

        load0 = os.getloadavg()
        reps_ws = max(3, args.reps // 3)
        ws_rows = bench_workspace(src, tmp, reps_ws, have_bwrap)
        load1 = os.getloadavg()
        now = ws_rows["now"]["wall_median_ms"]
        pooled = ws_rows["pool"]["wall_median_ms"]
        owned = ws_rows["pool_for_sandbox"]["wall_median_ms"]
        ws_data = {
            **meta,
            "files": args.files,
            "reps": reps_ws,
            "rows": ws_rows,
            "goal_ms": GOAL_WORKSPACE_MS,
            "goal_met_wall_median": now <= GOAL_WORKSPACE_MS,
            "goal_met_wall_median_pool": pooled <= GOAL_WORKSPACE_MS,
            "goal_met_wall_median_pool_for_sandbox": owned <= GOAL_WORKSPACE_MS,
            "load_average_before": list(load0),
            "load_average_after": list(load1),
        }
        print(f"workspace from {args.files} files on {meta['filesystem']} ({reps_ws} rounds):")
        print(f"  {'':36s} {'wall med':>9s} {'wall min':>9s} {'cpu med':>8s} {'ratio':>6s}")
        for name, r in ws_rows.items():
            ratio = r.get("ratio_to_before_wall_median")
            print(
                f"  {name:36s} {r['wall_median_ms']:9.1f} {r['wall_min_ms']:9.1f}"
                f" {r.get('cpu_median_ms', float('nan')):8.1f}"
                + (f" {ratio:5.2f}x" if ratio is not None else "")
            )

        ws = materialize(src, tmp / "cmd-ws")
        load2 = os.getloadavg()
        cmd_rows = bench_commands(ws, args.reps, have_bwrap, tmp)
        load3 = os.getloadavg()
        main_row = cmd_rows["true"].get("bwrap", {})
        session_row = cmd_rows["true"].get("bwrap_persistent", {})
        ahead_row = cmd_rows["true"].get("bwrap_prestarted", {})
        cmd_data = {
            **meta,
            "reps": args.reps,
            "commands": cmd_rows,
            "goal_added_ms": GOAL_ADDED_MS,
            "goal_met_added_wall_median": bool(main_row)
            and main_row["added_wall_median_ms"] <= GOAL_ADDED_MS,
            "goal_met_added_wall_median_persistent": bool(session_row)
            and session_row["added_wall_median_ms"] <= GOAL_ADDED_MS,
            "goal_met_added_wall_median_prestarted": bool(ahead_row)
            and ahead_row["added_wall_median_ms"] <= GOAL_ADDED_MS,
            "load_average_before": list(load2),
            "load_average_after": list(load3),
        }
        print(f"\nper command ({args.reps} interleaved rounds; added = vs bare, same round):")
        print(
            f"  {'command':15s} {'runner':31s} {'wall med':>8s} {'wall min':>8s}"
            f" {'added med':>9s} {'added min':>9s}"
        )
        for label, rows in cmd_rows.items():
            if "wall_median_ms" in rows or "taken" in rows:  # a single row, not a table
                print(f"  {label}: {rows}")
                continue
            for name, r in rows.items():
                extra = (
                    f" {r['added_wall_median_ms']:9.1f} {r['added_wall_min_ms']:9.1f}"
                    if "added_wall_median_ms" in r
                    else f" cpu mean {r['cpu_mean_ms']:.2f} ms"
                    if "cpu_mean_ms" in r
                    else ""
                )
                print(
                    f"  {label:15s} {name:31s} {r['wall_median_ms']:8.1f} {r['wall_min_ms']:8.1f}"
                    f"{extra}"
                )
        print(f"(load average {load0[0]:.1f} -> {load3[0]:.1f} on {os.cpu_count()} CPUs)")
        # written before the trees are deleted: on a disk mounted with `discard`, deleting
        # tens of thousands of files can take minutes
        out = Path(args.out)
        write_result(out / "workspace.json", ws_data, command=command)
        write_result(out / "command_overhead.json", cmd_data, command=command)
        print(f"wrote {out / 'workspace.json'} and {out / 'command_overhead.json'}", flush=True)


if __name__ == "__main__":
    main()
