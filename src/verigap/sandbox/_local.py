"""The unsandboxed backend: same interface, no isolation. For tests and debugging only."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from verigap.sandbox._base import DEFAULT_PATH, Sandbox, base_python
from verigap.sandbox._exec import run_capped
from verigap.sandbox._limits import Limits, launcher_argv


@functools.cache
def _shim_dir() -> str:
    """A per-process directory whose ``python``/``python3`` link to the base interpreter."""
    d = tempfile.mkdtemp(prefix="verigap-python-")
    atexit.register(shutil.rmtree, d, True)
    for name in ("python", "python3"):
        os.symlink(base_python(), os.path.join(d, name))
    return d


class UnsafeSandboxWarning(UserWarning):
    """Emitted every time an UnsafeLocalSandbox is created."""


class UnsafeLocalSandbox(Sandbox):
    """Runs commands directly on the host, in the workspace directory.

    There is NO isolation: the network, the whole filesystem (hidden tests included) and
    the caller's user are all reachable. Only rlimits, the wall-clock kill of the process
    group, the command's death with its caller (``setpriv --pdeathsig``, where installed) and
    the output cap apply; as root the process limit is not enforced by the kernel, and a
    child that calls ``setsid`` escapes the group kill.
    """

    def __init__(self, root: Path, limits: Limits = Limits()) -> None:
        super().__init__(root, limits)
        self.workdir = str(self.root)
        warnings.warn(
            f"UnsafeLocalSandbox at {self.root}: commands run UNSANDBOXED on the host "
            "(network, every file and your user are reachable). Use it only for tests.",
            UnsafeSandboxWarning,
            stacklevel=2,
        )

    def _adopt(self, paths: list[Path]) -> None:
        """Nothing to do: commands run as the caller, who created the paths."""

    def _default_path(self) -> str:
        return f"{_shim_dir()}:{Path(sys.base_prefix) / 'bin'}:{DEFAULT_PATH}"

    def _run(self, argv: list[str], env: dict[str, str], rel_cwd: str, timeout: float) -> tuple:
        wrapped = launcher_argv(base_python(), argv, self.limits, env)
        setpriv = shutil.which("setpriv")
        if setpriv is not None:  # the command dies with the process that ran it (as bwrap's
            # --die-with-parent does): a grader killed mid-run leaves nothing running
            wrapped = [setpriv, "--pdeathsig", "KILL", "--", *wrapped]
        return run_capped(
            wrapped,
            timeout=timeout,
            output_bytes=self.limits.output_bytes,
            env=env,
            cwd=str(self.root / rel_cwd),
        )
