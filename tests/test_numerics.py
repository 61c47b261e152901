"""The pinned numerics (verigap/numerics.py): every process that imports verigap runs NumPy and
PyTorch on the same kernels, a process whose libraries beat the pin is refused with the fix,
results record the kernels, and the same seed gives the committed numbers whatever kernels the
environment asks for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verigap import numerics
from verigap.experiments.metrics import metric_value
from verigap.experiments.registry import load_registry
from verigap.experiments.runner import run_experiment
from verigap.patchworld.pilot import jobs
from verigap.report.pilot import pilot_results
from verigap.results import read_meta, read_result, write_result
from verigap.runs import run_jobs
from verigap.silentbug.runner import training_env, versions

ROOT = Path(__file__).resolve().parents[1]
TRANSFORMER_REGISTRY = ROOT / "src/verigap/experiments/predictions_transformer.yaml"

pinned = pytest.mark.skipif(
    numerics.mode() != "pinned", reason=f"this machine does not pin: {numerics.unpinnable()}"
)


def _flags() -> set[str]:
    return numerics._cpu_flags() or set()


def _child(code: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -c code`` with this environment minus the pin, plus ``env``: a process that
    starts on a machine whose environment asks for other kernels."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in numerics.PIN and k != numerics.OPT_OUT and k != "VERIGAP_NUMERICS_REEXEC"
    }
    base["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ---- the pin in this process and in its children -------------------------------------------


@pinned
def test_this_process_runs_the_pinned_kernels() -> None:
    import numpy  # noqa: F401
    import torch

    torch.ones(2, 2) @ torch.ones(2, 2)
    for key, value in numerics.PIN.items():
        assert os.environ[key] == value
    rec = numerics.record()
    assert rec["pin"] == numerics.PIN_NAME and rec["problems"] == []
    assert [b["architecture"] for b in rec["blas"]] == ["Haswell"]
    assert "X86_V4" not in rec["numpy_simd"]
    assert rec["torch"]["cpu_capability"] == "AVX2" and rec["torch"]["mkl_cbwr_branch"] == 3


@pinned
def test_a_child_asking_for_other_kernels_gets_the_pinned_ones() -> None:
    asks = {
        "OPENBLAS_CORETYPE": "Sandybridge",
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_CBWR": "AUTO",
        "OMP_NUM_THREADS": "2",
    }
    code = (
        "import json, verigap, numpy, torch; from verigap import numerics; "
        "torch.ones(2, 2) @ torch.ones(2, 2); print(json.dumps(numerics.record()))"
    )
    proc = _child(code, asks)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["problems"] == [] and rec["blas"][0]["architecture"] == "Haswell"
    assert rec["torch"]["cpu_capability"] == "AVX2" and rec["torch"]["threads"] == 1
    assert rec["overridden"] == asks  # and the record says what the pin replaced


@pinned
def test_a_process_that_loaded_numpy_first_is_refused_with_the_fix() -> None:
    code = "import numpy, verigap; from verigap.patchworld.grpo import train; train('unused', {})"
    proc = _child(code, {"OPENBLAS_CORETYPE": "Sandybridge"})
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "NumericsError: NumPy's OpenBLAS uses Sandybridge kernels, not Haswell" in last
    assert "Import verigap before NumPy" in last and "VERIGAP_NUMERICS=native" in last


@pinned
def test_the_console_entry_starts_again_pinned_when_numpy_beat_it() -> None:
    code = (
        "import numpy, sys; sys.argv[0] = 'verigap'; from verigap.cli import app; app(['numerics'])"
    )
    proc = _child(code, {"OPENBLAS_CORETYPE": "Sandybridge"})
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["blas"][0]["architecture"] == "Haswell" and rec["problems"] == []


def test_native_leaves_the_machine_kernels_and_says_so() -> None:
    code = (
        "import json, verigap, numpy; from verigap import numerics; "
        "print(json.dumps([numerics.record(), numerics.env()]))"
    )
    proc = _child(code, {numerics.OPT_OUT: "native", "OPENBLAS_CORETYPE": "Sandybridge"})
    assert proc.returncode == 0, proc.stderr
    rec, env = json.loads(proc.stdout)
    assert rec["pin"] == "native" and rec["why_unpinned"] == "VERIGAP_NUMERICS=native"
    assert env == {} and rec["env"]["OPENBLAS_CORETYPE"] == "Sandybridge"


def test_a_machine_that_cannot_take_the_pin_is_named(monkeypatch) -> None:
    monkeypatch.delenv(numerics.OPT_OUT, raising=False)
    monkeypatch.setattr(numerics.platform, "machine", lambda: "aarch64")
    assert "aarch64 is not x86-64" in numerics.unpinnable()
    assert numerics.mode() == "unpinnable" and numerics.env() == {}
    assert numerics.record()["pin"] == "unpinnable"
    monkeypatch.setattr(numerics.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(numerics, "_cpu_flags", lambda: {"avx", "sse4_2"})
    assert numerics.unpinnable() == (
        "this CPU lacks avx2, fma: the pinned kernels need AVX2 and FMA"
    )


def test_results_record_the_pin_cpu_and_kernels(tmp_path: Path) -> None:
    path = write_result(tmp_path / "r.json", {"x": 1}, command="make x")
    rec = read_meta(path)["numerics"]
    expected = numerics.PIN_NAME if numerics.mode() == "pinned" else numerics.mode()
    assert rec["pin"] == expected
    assert rec["cpu"] and set(rec["env"]) == set(numerics.PIN)
    assert {"blas", "numpy_simd", "torch", "problems"} <= set(rec)


@pinned
def test_substrate_runs_get_the_pin_and_their_cache_keys_name_it(monkeypatch) -> None:
    env = training_env()
    assert {k: env[k] for k in numerics.PIN} == numerics.PIN and env["OMP_NUM_THREADS"] == "1"
    pinned_key = versions()
    monkeypatch.setenv(numerics.OPT_OUT, "native")  # a run on the machine's own kernels ...
    assert training_env() == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert versions() != pinned_key  # ... is cached apart from the pinned one


# ---- same seed, same numbers ---------------------------------------------------------------


@pinned
@pytest.mark.slow
def test_pilot_runs_reproduce_the_committed_numbers_exactly(tmp_path: Path) -> None:
    committed = read_result(ROOT / "results/patchworld/pilot.json")["settings"]
    chosen = {"visible/seed0", "audit_25/seed1", "visible_k2/seed2"}
    run_jobs([j for j in jobs(tmp_path) if j.name in chosen], executor="serial", progress=False)
    names = sorted({c.split("/")[0] for c in chosen})
    rows = pilot_results(tmp_path, names)["settings"]
    compared = 0
    for name, row in rows.items():
        (seed,) = row["seeds"]
        at = committed[name]["seeds"].index(seed)
        for key, cell in row.items():
            if isinstance(cell, dict) and "per_seed" in cell:
                assert cell["per_seed"][0] == committed[name][key]["per_seed"][at], (name, key)
                compared += 1
    assert compared == 3 * 8


def _committed(results: str, setting: str, seed_index: int) -> dict[str, float]:
    """Every per-seed number a results file of the experiment log holds for one run."""
    data = read_result(ROOT / results)
    return {
        m: v[seed_index]
        for p in data["predictions"].values()
        for m, v in p["values"].get(setting, {}).items()
    }


@pinned
@pytest.mark.slow
@pytest.mark.parametrize(
    ("registry", "results", "setting"),
    [
        ("predictions.yaml", "verdicts.json", "audit_10_penalty0"),
        ("predictions_transformer.yaml", "verdicts_transformer.json", "tf_visible"),
        ("predictions_multiagent.yaml", "verdicts_multiagent.json", "learned_audit_10"),
        ("predictions_multiagent.yaml", "verdicts_multiagent.json", "writer_learned_seen"),
    ],
)
def test_experiment_log_runs_reproduce_the_committed_numbers_exactly(
    tmp_path: Path, registry: str, results: str, setting: str
) -> None:
    reg = load_registry(ROOT / "src/verigap/experiments" / registry)
    committed = _committed(f"results/experiments/{results}", setting, 0)
    assert committed  # the predictions read this setting
    cfg = reg.config(setting, reg.seeds[0]).model_dump(mode="json")
    result = run_experiment(tmp_path / "run", cfg, tmp_path / "_sft")
    assert {m: metric_value(m, result) for m in committed} == committed


# Run in a child: one quick pilot run and one quick transformer run, fingerprinted (every
# number of their results and logged curves, timings left out).
FINGERPRINT = """
import hashlib, json, sys, tempfile
from pathlib import Path
import verigap
from verigap import numerics
from verigap.experiments.registry import load_registry
from verigap.patchworld.grpo import train
from verigap.patchworld.pilot import jobs
from verigap.runs import read_jsonl

def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("wall_s", "cpu_s", "sps")}
    return [strip(v) for v in x] if isinstance(x, list) else x

d, out = Path(tempfile.mkdtemp()), {}
job = next(j for j in jobs(d / "pilot", quick=True) if j.name == "visible/seed0")
tf = load_registry(sys.argv[1]).config("tf_visible", 0, quick=True).model_dump(mode="json")
for name, run_dir, cfg, cache in (("pilot", job.run_dir, job.kwargs["config"], d / "sft"),
                                  ("transformer", d / "tf", tf, d / "tf_sft")):
    r = train(run_dir, cfg, sft_cache=cache)
    blob = json.dumps([strip(r), strip(read_jsonl(Path(run_dir) / "metrics.jsonl"))],
                      sort_keys=True)
    out[name] = hashlib.sha256(blob.encode()).hexdigest()
print(json.dumps(out))
"""


def _fingerprint(env: dict[str, str]) -> dict[str, str]:
    code = FINGERPRINT.replace("sys.argv[1]", repr(str(TRANSFORMER_REGISTRY)))
    proc = _child(code, env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pinned
@pytest.mark.slow
def test_environments_asking_for_other_kernels_give_identical_numbers() -> None:
    machines = [
        {},
        {"OPENBLAS_CORETYPE": "Sandybridge", "ATEN_CPU_CAPABILITY": "default"},
        {
            "OPENBLAS_CORETYPE": "Zen",
            "MKL_CBWR": "AUTO",
            "ONEDNN_MAX_CPU_ISA": "ALL",
            "OMP_NUM_THREADS": "2",
            "OPENBLAS_NUM_THREADS": "2",
        },
    ]
    if "avx512f" in _flags():  # only a CPU with AVX-512 can honour these
        machines.append(
            {
                "OPENBLAS_CORETYPE": "SkylakeX",
                "ATEN_CPU_CAPABILITY": "avx512",
                "MKL_ENABLE_INSTRUCTIONS": "AVX512",
            }
        )
    prints = [_fingerprint(m) for m in machines]
    assert all(p == prints[0] for p in prints), prints
    # and the fingerprint can tell kernels apart: unpinned, another BLAS kernel and PyTorch's
    # generic kernels change the numbers of the very same runs
    other = _fingerprint(
        {
            numerics.OPT_OUT: "native",
            "OPENBLAS_CORETYPE": "Sandybridge",
            "ATEN_CPU_CAPABILITY": "default",
        }
    )
    assert other["pilot"] != prints[0]["pilot"]
    assert other["transformer"] != prints[0]["transformer"]
