"""Typed errors. Every message names what is wrong and how to fix it."""


class VerigapError(Exception):
    """Base class: the CLI prints these as one clear line instead of a traceback."""


class ConfigError(VerigapError, ValueError):
    """A config, task file or registry entry failed validation."""


class SandboxUnavailable(VerigapError, RuntimeError):
    """The sandbox backend cannot run here (as distinct from a command that failed)."""


class IntegrityError(VerigapError, RuntimeError):
    """A prepared or cached artifact that grading trusts no longer matches the hash it was
    made with (tampered or corrupted); it is refused, never used."""
