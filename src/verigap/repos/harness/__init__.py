"""Scripts that run *inside* a sandbox, next to the project under test.

They import nothing from verigap (verigap is not mounted in the sandbox): only the standard
library and, for ``pytest_runner``, pytest from the prepared environment (``_verigap_forward``
also uses ``cloudpickle``, which the grader copies next to them). The grader copies them
into a directory of its own and mounts it read-only, so an agent never sees or edits them.
"""

from pathlib import Path

HARNESS_DIR = Path(__file__).parent
RUNNER = HARNESS_DIR / "pytest_runner.py"
EQUIV = HARNESS_DIR / "equiv_runner.py"
FORWARD = HARNESS_DIR / "_verigap_forward.py"
WARM = HARNESS_DIR / "warm_server.py"
