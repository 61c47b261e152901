"""Shell-command write analysis moved to the core (:mod:`verigap.shell_writes`): the claim
checks in the core read it too. This name stays for existing imports."""

from verigap.shell_writes import Write, writes  # noqa: F401
