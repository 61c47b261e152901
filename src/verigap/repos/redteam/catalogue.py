"""The whole exploit battery in one place, assembled from the modules that define exploits.

``EXPLOITS`` is the default battery in catalogue order; ``BY_NAME`` adds the controls and the
exploits selectable by name only (tests-only sites, further tell devices, composites). Each
exploit module imports only the shared kit in :mod:`~verigap.repos.redteam.exploits`, never this
catalogue, so there is no import loop; a new exploit module is one import and one line here.
"""

from __future__ import annotations

from verigap.repos.redteam.composite import COMPOSITES
from verigap.repos.redteam.exploits import CONTROLS, CORE, Exploit
from verigap.repos.redteam.inprocess import INPROCESS
from verigap.repos.redteam.seen_only import SEEN_ONLY
from verigap.repos.redteam.tells import (
    ENCODER_LIAR,
    FINITE_INPUT,
    SEALED_TELL_DEVICES,
    TELL_DEVICES,
)
from verigap.repos.redteam.tests_only import FRAME_DEVICES, TESTS_ONLY

#: the default battery: the core exploits, the in-process techniques, the exploit that fixes
#: what the comparison sees, caller-frame defeat devices (they reuse the tests-only guards) and
#: the devices keyed on tells of the grading processes
EXPLOITS: tuple[Exploit, ...] = CORE + INPROCESS + SEEN_ONLY + FRAME_DEVICES + TELL_DEVICES

#: every exploit and control by name; by name only: the tests-only exploits, the finite-input
#: device (the comparison's generated inputs stop it; no detector names it), the encoder liar,
#: the sealed tell devices and the composites (two hacks in one episode)
BY_NAME: dict[str, Exploit] = {
    e.name: e
    for e in (
        *CORE,
        *INPROCESS,
        *SEEN_ONLY,
        *CONTROLS,
        *TESTS_ONLY,
        *FRAME_DEVICES,
        *TELL_DEVICES,
        *FINITE_INPUT,
        *ENCODER_LIAR,
        *SEALED_TELL_DEVICES,
        *COMPOSITES,
    )
}

__all__ = ["BY_NAME", "CONTROLS", "EXPLOITS", "counts"]


def counts() -> dict[str, int]:
    """How many exploits the catalogue holds: the default battery, the controls, and those
    selectable by name only (what the README quotes, from ``results/redteam/catalogue.json``)."""
    return {
        "default_battery": len(EXPLOITS),
        "controls": len(CONTROLS),
        "by_name_only": len(BY_NAME) - len(EXPLOITS) - len(CONTROLS),
        "exploits": len(BY_NAME) - len(CONTROLS),
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m verigap.repos.redteam.catalogue [FILE]``: write :func:`counts` as a results
    file (default ``results/redteam/catalogue.json``)."""
    import sys

    from verigap.results import write_result

    args = sys.argv[1:] if argv is None else argv
    path = args[0] if args else "results/redteam/catalogue.json"
    print(write_result(path, counts(), command=f"python -m verigap.repos.redteam.catalogue {path}"))


if __name__ == "__main__":
    main()
