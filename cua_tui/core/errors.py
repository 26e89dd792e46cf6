"""The errors a command says in its one form (``Error: PATH: REASON; HINT``, one line on stderr), whichever
layer raises them. The command line's entry point catches ``CommandError`` once and exits ``exit_code``."""

from __future__ import annotations

from pathlib import PurePath


class CommandError(Exception):
    """A command that could not do its work (a service failed, a run directory could not be written):
    exit status 1. ``path`` and ``hint``, where given, frame the reason as the one form has it."""

    exit_code: int = 1

    def __init__(self, reason: str, *, path: str | PurePath | None = None, hint: str | None = None) -> None:
        text = reason if path is None else f"{path}: {reason}"
        super().__init__(f"{text}; {hint}" if hint else text)


class UsageError(CommandError):
    """The root of every usage error: bad usage, configuration or input (a flag, a settings, policy or
    tasks file, a folder that is no run directory), said before anything runs. Exit status 2."""

    exit_code = 2


class Unavailable(ValueError, UsageError):
    """A backend or agent that cannot be used as configured (no key, no engine, no image, an unknown name):
    a usage error, said in one line before anything starts."""
