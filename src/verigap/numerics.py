"""One numeric pin for every process that trains or evaluates: same seed, same numbers on any
x86-64 machine with AVX2.

NumPy's OpenBLAS, NumPy's own SIMD loops, PyTorch's ATen kernels, MKL (PyTorch's matmuls) and
oneDNN (some of PyTorch's element-wise ops) each pick their kernels from the CPU they find, and
kernels for different instruction sets round differently: an AVX-512 machine trained other
policies from the same seed than an AVX2 one. Each library makes that choice once, when it
loads, from environment variables. So the pin is a set of environment variables (``PIN``) that
``apply()`` writes into ``os.environ`` when verigap is first imported, before verigap imports
NumPy; every child process (process pools, Ray nodes, sandboxed runs) inherits them, and
``problems()`` says when a library was loaded with other kernels before the pin could act.

Measured on an AMD EPYC with AVX-512 (docs/results.md, "Pinned numerics"): OpenBLAS's Haswell
kernels reproduce the committed pilot; MKL refuses its AVX2 branch on a non-Intel CPU (it reads
back "auto"), so COMPATIBLE is the one MKL branch that holds on both vendors. Threads are one
per process: verigap gets its parallelism from processes, and a BLAS call split over threads
can sum in another order. ``VERIGAP_NUMERICS=native`` leaves the machine's own kernels (faster
on some machines, numbers then differ between machines); the record says so.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

from verigap.errors import VerigapError

#: The environment that pins the kernels (each variable is read when its library loads).
PIN: dict[str, str] = {
    "OPENBLAS_CORETYPE": "Haswell",  # NumPy's BLAS: the AVX2 kernels
    "OPENBLAS_NUM_THREADS": "1",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # NumPy's loops: AVX2 at most
    "OMP_NUM_THREADS": "1",  # PyTorch's intra-op threads
    "MKL_NUM_THREADS": "1",
    "MKL_CBWR": "COMPATIBLE",  # MKL's one branch that holds on Intel and AMD
    "ATEN_CPU_CAPABILITY": "avx2",  # PyTorch's own vectorised kernels
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN's JIT kernels (GELU, ...)
    "DNNL_MAX_CPU_ISA": "AVX2",
}
#: The name of the pin in results files: what a reader compares between two files.
PIN_NAME = "x86-64-avx2"
#: ``native`` opts out of the pin (the machine's own kernels); unset or ``pinned`` pins.
OPT_OUT = "VERIGAP_NUMERICS"
#: The CPU features the pinned kernels need.
NEEDS = ("avx2", "fma")
#: What MKL reports for the COMPATIBLE branch (``mkl_cbwr_get(MKL_CBWR_BRANCH)``).
_MKL_COMPATIBLE = 3


class NumericsError(VerigapError, RuntimeError):
    """A library was loaded with other kernels than the pin asks for."""


def _cpu_flags() -> set[str] | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def unpinnable() -> str | None:
    """Why this machine cannot take the pin (None when it can)."""
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        return (
            f"{platform.machine()} is not x86-64: the pin names x86 kernels; numbers from "
            "this machine may differ from x86-64 ones"
        )
    flags = _cpu_flags()
    if flags is None:
        return "cannot read /proc/cpuinfo to check for AVX2 and FMA"
    if missing := [f for f in NEEDS if f not in flags]:
        return f"this CPU lacks {', '.join(missing)}: the pinned kernels need AVX2 and FMA"
    return None


def mode() -> str:
    """``pinned``, ``native`` (opted out) or ``unpinnable`` (this machine cannot take it)."""
    if os.environ.get(OPT_OUT, "pinned").strip().lower() == "native":
        return "native"
    return "unpinnable" if unpinnable() else "pinned"


def env() -> dict[str, str]:
    """The pin's variables, for a child process whose environment is built from scratch
    (empty when this process does not pin)."""
    return dict(PIN) if mode() == "pinned" else {}


_overridden: dict[str, str] = {}


def apply() -> None:
    """Write the pin into ``os.environ`` (idempotent). Called when verigap is imported, so in
    a process that imports verigap before NumPy and PyTorch the libraries load pinned."""
    if mode() != "pinned":
        return
    for key, value in PIN.items():
        old = os.environ.get(key)
        if old is not None and old != value and key not in _overridden:
            _overridden[key] = old
        os.environ[key] = value


def blas() -> list[dict[str, Any]]:
    """The BLAS libraries loaded in this process (threadpoolctl): kernel family and threads."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [
        {k: info.get(k) for k in ("internal_api", "architecture", "num_threads", "version")}
        for info in threadpool_info()
        if info.get("user_api") == "blas"
    ]


def _numpy_simd() -> list[str] | None:
    if "numpy" not in sys.modules:
        return None
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]


def _mkl_branch() -> int | None:
    """MKL's active reproducibility branch, read from the copy linked into PyTorch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    import ctypes

    try:
        lib = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
        get = lib.mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    return int(get(1))


def _torch_state() -> dict[str, Any] | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "mkl_cbwr_branch": _mkl_branch(),
    }


def problems() -> list[str]:
    """What in this process runs on other kernels than the pin asks for (empty: all pinned,
    or this process does not pin). Libraries not loaded yet will load pinned."""
    if mode() != "pinned":
        return []
    out = []
    for lib in blas():
        if lib["internal_api"] == "openblas" and lib["architecture"] != PIN["OPENBLAS_CORETYPE"]:
            out.append(
                f"NumPy's OpenBLAS uses {lib['architecture']} kernels, not "
                f"{PIN['OPENBLAS_CORETYPE']}"
            )
    disabled = set(PIN["NPY_DISABLE_CPU_FEATURES"].split())
    if simd := sorted(disabled & set(_numpy_simd() or ())):
        out.append(f"NumPy's loops use {', '.join(simd)}")
    if (t := _torch_state()) is not None:
        if t["cpu_capability"] != PIN["ATEN_CPU_CAPABILITY"].upper():
            out.append(
                f"PyTorch's kernels use {t['cpu_capability']}, not "
                f"{PIN['ATEN_CPU_CAPABILITY'].upper()}"
            )
        if t["mkl_cbwr_branch"] not in (None, _MKL_COMPATIBLE):
            out.append(f"MKL runs branch {t['mkl_cbwr_branch']}, not COMPATIBLE")
    return out


def require() -> None:
    """Refuse to train or evaluate on other kernels than the pin's (one clear line)."""
    if found := problems():
        raise NumericsError(
            f"{'; '.join(found)}: a library loaded before verigap could pin its kernels, so "
            "these numbers would not match other machines. Import verigap before NumPy and "
            "PyTorch (or run the `verigap` command), or export the pin first "
            "(`eval $(verigap numerics --env)`); "
            f"{OPT_OUT}=native runs on this machine's own kernels instead"
        )


def reexec_if_needed() -> None:
    """For a script's entry: start this process again, pinned, when a library beat the pin
    (the environment is already set, so the new process loads pinned); at most once."""
    if not problems() or os.environ.get("VERIGAP_NUMERICS_REEXEC"):
        require()
        return
    os.environ["VERIGAP_NUMERICS_REEXEC"] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def pin_torch() -> None:
    """What PyTorch needs beyond the environment: one thread and deterministic algorithms."""
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def record() -> dict[str, Any]:
    """What produced a result's numbers, for its ``meta``: the pin, the CPU and the kernels
    each loaded library runs."""
    m = mode()
    return {
        "pin": PIN_NAME if m == "pinned" else m,
        "why_unpinned": (
            unpinnable() if m == "unpinnable" else f"{OPT_OUT}=native" if m == "native" else None
        ),
        "cpu": cpu_model(),
        "env": {k: os.environ.get(k) for k in PIN},
        "overridden": dict(_overridden),
        "blas": blas(),
        "numpy_simd": _numpy_simd(),
        "torch": _torch_state(),
        "problems": problems(),
    }


apply()  # importing verigap imports this module first: the pin is set before NumPy loads
