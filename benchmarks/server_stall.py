"""Does one busy session stall the server? One repo session runs ``sleep S`` while 45 clients
poll that session's state at once, and /health, another session's state and another session's
step are timed, all during the command.

The same measurement that showed the old server's /health taking 32 s behind a 40 s command
(endpoints on one thread pool; state waiting on the session lock). Run:
`python benchmarks/server_stall.py [--sleep 10] [--pollers 45]`; writes
results/server/stall.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verigap.repos.tasks import make_tasks
from verigap.results import write_result
from verigap.server import BackgroundServer, Client, ServerConfig

FIXTURE_LIB = Path(__file__).parent.parent / "tests" / "repos" / "fixture_lib"


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sleep", type=float, default=10.0)
    ap.add_argument("--pollers", type=int, default=45)
    ap.add_argument("--out", default="results/server/stall.json")
    a = ap.parse_args()
    backend = "bwrap" if shutil.which("bwrap") else "unsafe"
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        os.environ["VERIGAP_CACHE"] = str(tmp_path / "cache")
        make_tasks(
            str(FIXTURE_LIB),
            tmp_path / "tasks",
            k=2,
            n=1,
            max_candidates=6,
            seed=0,
            env="current",
            backend=backend,
            log=lambda s: None,
        )
        config = ServerConfig.with_tasks_from(
            tmp_path / "tasks", root=tmp_path / "root", backend=backend
        )
        with (
            BackgroundServer(config) as url,
            Client(url) as c,
            ThreadPoolExecutor(a.pollers + 4) as pool,
        ):
            busy, other = c.session("repo"), c.session("patchworld", k=4)
            busy.reset(seed=0, options={"task": sorted(config.tasks)[0]})
            other.reset(seed=0)
            t0 = time.perf_counter()
            command = pool.submit(
                busy.step, {"tool": "run", "arguments": {"command": f"sleep {a.sleep:g}"}}
            )
            time.sleep(0.5)
            polls = [pool.submit(timed, busy.state) for _ in range(a.pollers)]
            health = [timed(c.health) for _ in range(5)]
            other_state = [timed(other.state) for _ in range(5)]
            other_step = timed(lambda: other.step({"actions": [1]}))
            poll_s = [f.result() for f in polls]
            during = time.perf_counter() - t0 < a.sleep  # all answered while the command ran
            out = command.result()
            command_s = time.perf_counter() - t0
    data = {
        "sleep_s": a.sleep,
        "pollers": a.pollers,
        "command_s": round(command_s, 2),
        "command_ok": not out["observation"]["is_error"],
        "answered_during_command": during,
        "health_max_ms": round(1000 * max(health), 1),
        "other_state_max_ms": round(1000 * max(other_state), 1),
        "other_step_ms": round(1000 * other_step, 1),
        "busy_state_max_ms": round(1000 * max(poll_s), 1),
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg()[0],
    }
    write_result(a.out, data, command="python " + " ".join(sys.argv))
    print(data)


if __name__ == "__main__":
    main()
