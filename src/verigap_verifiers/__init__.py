"""The ``verifiers`` taskset plugin for verigap: ``--env.taskset.id verigap-verifiers``.

verifiers imports a taskset by a top-level module name, so this package only re-exports
:mod:`verigap.server.verifiers_env` (the one Taskset and the one Env it finds via ``__all__``).
"""

from verigap.server.verifiers_env import (
    VerigapConfig,
    VerigapData,
    VerigapEnv,
    VerigapEnvConfig,
    VerigapTask,
    VerigapTaskset,
)

__all__ = [
    "VerigapConfig",
    "VerigapData",
    "VerigapEnv",
    "VerigapEnvConfig",
    "VerigapTask",
    "VerigapTaskset",
]
