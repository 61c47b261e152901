"""Run directories, atomic result files, resume, and executors for independent jobs.

A run is a directory holding ``config.json`` (full, resolved), ``metrics.jsonl`` (one line per
logged step), optional per-episode files, and ``result.json`` written last and atomically. A run
with ``result.json`` is complete, so a sweep skips it on resume and never leaves half a result.

The code that defines a job (a picklable callable plus its run directory) does not know which
executor runs it: serial, a local process pool (default: all cores), or Ray.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from verigap import numerics
from verigap.errors import ConfigError

RESULT = "result.json"
CONFIG = "config.json"
METRICS = "metrics.jsonl"

Executor = Literal["serial", "process", "ray"]


def config_key(config: dict[str, Any]) -> str:
    """A run configuration's key without its seed: the seeds of one setting share it."""
    import hashlib

    cfg = {k: v for k, v in config.items() if k != "seed"}
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:12]


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that readers see either the old file or the whole new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e}); delete the file to redo that run") from e


class JsonlWriter:
    """Appends one JSON record per line and flushes each, so a crash keeps every finished line."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(path, "w")  # noqa: SIM115 - closed in close()

    def write(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record, sort_keys=True) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete line; a torn last line (a crash mid-write) is ignored."""
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return out


def is_complete(run_dir: Path) -> bool:
    return (run_dir / RESULT).is_file()


@dataclass(frozen=True)
class Job:
    """One independent unit of work: ``fn(run_dir, **kwargs)`` writes the run directory and
    returns its result dict (which the executor stores as result.json)."""

    name: str
    run_dir: Path
    fn: Callable[..., dict[str, Any]]
    kwargs: dict[str, Any]
    config: dict[str, Any] | None = None  # the resolved config; a finished run must match it


def _execute(job: Job) -> tuple[str, dict[str, Any]]:
    numerics.require()  # every executor's worker: pinned kernels or a clear refusal
    job.run_dir.mkdir(parents=True, exist_ok=True)
    # Two sweeps sharing a cache may both find a run missing: one trains it, the other waits
    # and reads the result. Without the lock both wrote the same metrics.jsonl at once and the
    # interleaved file gave a wrong score.
    with open(job.run_dir.parent / f"{job.run_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(job.run_dir):
            return job.name, read_json(job.run_dir / RESULT)
        result = job.fn(job.run_dir, **job.kwargs)
        write_json_atomic(job.run_dir / RESULT, result)
    return job.name, result


def run_jobs(
    jobs: Sequence[Job],
    *,
    executor: Executor = "process",
    workers: int | None = None,
    progress: bool = True,
    description: str = "runs",
) -> dict[str, dict[str, Any]]:
    """Run every incomplete job; return every job's result (finished earlier or now).

    Complete runs (those with result.json) are read back, not redone.
    """
    results: dict[str, dict[str, Any]] = {}
    todo: list[Job] = []
    for job in jobs:
        if is_complete(job.run_dir):
            _check_same_config(job)
            results[job.name] = read_json(job.run_dir / RESULT)
        else:
            todo.append(job)
    with _progress(progress) as bar:
        task = bar.add_task(description, total=len(jobs), completed=len(jobs) - len(todo))
        for name, result in _dispatch(todo, executor, workers):
            results[name] = result
            bar.advance(task)
    return {job.name: results[job.name] for job in jobs}


def _check_same_config(job: Job) -> None:
    stored = job.run_dir / CONFIG
    if job.config is not None and stored.is_file() and read_json(stored) != job.config:
        raise ConfigError(
            f"{job.run_dir} already holds a finished run with a different config; "
            "write this sweep to another directory, or delete that run to redo it"
        )


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not enabled,
        transient=False,
    )


def _dispatch(
    todo: list[Job], executor: Executor, workers: int | None
) -> Iterable[tuple[str, dict[str, Any]]]:
    if not todo:
        return
    if executor == "serial" or (executor == "process" and (workers == 1 or len(todo) == 1)):
        for job in todo:
            yield _execute(job)
    elif executor == "process":
        n = min(workers or os.cpu_count() or 1, len(todo))
        with ProcessPoolExecutor(max_workers=n) as pool:
            futures = [pool.submit(_execute, job) for job in todo]
            for fut in as_completed(futures):
                yield fut.result()
    elif executor == "ray":
        yield from _dispatch_ray(todo, workers)
    else:
        raise ConfigError(f"unknown executor {executor!r}; use serial, process or ray")


def _dispatch_ray(
    todo: list[Job], workers: int | None = None
) -> Iterable[tuple[str, dict[str, Any]]]:
    """Each job is one Ray task needing one CPU, spread over the cluster's nodes; at most
    ``workers`` run at once when given (else as many as the cluster has CPUs). Results come back
    as tasks finish, and each run directory is written by the node that ran it, so ``out`` must
    be a path every node sees at the same place (a shared filesystem; see docs/serving.md)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("executor 'ray' needs Ray: pip install 'verigap[ray]'") from None
    if not ray.is_initialized():
        # workers on nodes started elsewhere (``ray start``) get the pin through the job's env
        ray.init(
            address=os.environ.get("RAY_ADDRESS"),
            ignore_reinit_error=True,
            logging_level="WARNING",
            log_to_driver=False,
            runtime_env={"env_vars": numerics.env()} if numerics.env() else None,
        )
    remote = ray.remote(num_cpus=1, scheduling_strategy="SPREAD", max_retries=0)(_execute)
    queue = list(todo)
    limit = workers or len(queue)
    pending = [remote.remote(queue.pop(0)) for _ in range(min(limit, len(queue)))]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        if queue:
            pending.append(remote.remote(queue.pop(0)))
        yield ray.get(done[0])


@contextlib.contextmanager
def local_ray_cluster(nodes: int = 2, cpus_per_node: int = 1, attempts: int = 3) -> Iterator[Any]:
    """A Ray cluster on loopback — a head and ``nodes - 1`` more node processes, each with its
    own raylet — connected as this process's Ray. For tests and benchmarks of the ``ray``
    executor; a real cluster is started with ``ray start`` (docs/serving.md). Node start-up on a
    loaded machine can miss Ray's own deadlines, so a failed start is retried ``attempts`` times.
    Node processes inherit this process's environment (``VERIGAP_CACHE``, ``PATH``)."""
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:
        raise ConfigError("a local Ray cluster needs Ray: pip install 'verigap[ray]'") from None
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")  # raylets on a busy machine
    for attempt in range(1, attempts + 1):
        cluster = None
        try:
            cluster = Cluster(
                initialize_head=True,
                head_node_args={"num_cpus": cpus_per_node, "include_dashboard": False},
            )
            for _ in range(nodes - 1):
                cluster.add_node(num_cpus=cpus_per_node)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
            break
        except Exception:
            if ray.is_initialized():
                ray.shutdown()
            if cluster is not None:
                cluster.shutdown()
            _kill_own_ray_children()  # a head that failed to start leaves no handle to stop it
            if attempt == attempts:
                raise
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def _kill_own_ray_children() -> None:
    """SIGKILL and reap this process's own child processes that run Ray's binaries."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmd = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and b"/ray/" in cmd:
            pid = int(stat.parent.name)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
