"""The flags of the commands that make runs (``run``, ``fleet``, ``demo``; ``replay`` takes ``--theme``, and
every command that reads runs ``--runs-dir``), each declared once, and the one function that turns their
parsed values into ``RunOptions``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..agents.vendors import VENDORS
from ..core.grammars import GRAMMARS
from ..desktops import BACKENDS

if TYPE_CHECKING:
    from ..build import RunOptions

F = TypeVar("F", bound=Callable[..., Any])

# How a run is driven, not what it is made of: no RunOptions field of their own (``run_options``
# turns --headless and --on-confirm into ``decisions``; the TUI takes --theme; --otel adds a listener).
DRIVING = ("headless", "theme", "on_confirm", "otel")

_COUNT = click.IntRange(1, 10**9)
_PATH = click.Path(path_type=Path)

# Each flag: its declarations and settings as ``run`` has them (a command may change its help or
# default). Its parameter is named as the RunOptions field it fills; the order is ``run --help``'s.
FLAGS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "task": (("--task",), {"default": "", "help": "What the agent should do (sent to the model; a lab has its own)."}),
    "backend": (
        ("--backend",),
        {
            "default": "local",
            "show_default": True,
            "type": click.Choice(tuple(BACKENDS)),
            "help": "Desktop: " + ", ".join(backend.about for backend in BACKENDS.values()) + ".",
        },
    ),
    "screen": (("--screen",), {"default": "1024x720", "show_default": True, "help": "Screen size WIDTHxHEIGHT."}),
    "agent": (
        ("--agent",),
        {
            "default": "openai",
            "show_default": True,
            "help": "; ".join(f"{v.spec}: {v.about}" for v in VENDORS.values()) + ".",
        },
    ),
    "model": (
        ("--model",),
        {
            "default": None,
            "help": "Model name (default: "
            + ", ".join(f"{v.default_model} for {v.name}" for v in VENDORS.values() if v.default_model)
            + "). Keys come from "
            + " / ".join(v.key_variable for v in VENDORS.values() if v.key_variable)
            + " or the settings file.",
        },
    ),
    "base_url": (
        ("--base-url",),
        {
            "default": None,
            "help": "API base URL for the model, any compatible server (default: "
            + " / ".join(v.base_url_variable for v in VENDORS.values() if v.base_url_variable)
            + ", else the settings' base_url, else the vendor's).",
        },
    ),
    "grammar": (
        ("--grammar",),
        {
            "default": None,
            "type": click.Choice(tuple(GRAMMARS)),
            "help": "With --agent openai-compatible: the model family's text grammar (default: from the model's "
            "name; a name none is known by needs it). "
            + "; ".join(f"{g.name}: {g.family}" for g in GRAMMARS.values())
            + ".",
        },
    ),
    "lab": (
        ("--lab",),
        {
            "default": None,
            "help": "Fixture application with its own verifier (local desktop): form, search-export or injection.",
        },
    ),
    "url": (("--url",), {"default": None, "help": "Page to open on the local desktop (its origin is allowed)."}),
    "texts": (
        ("--texts",),
        {
            "type": _PATH,
            "default": None,
            "help": "With --agent script:PATH: a JSON file mapping SHA-256 to typed text, filling the placeholders "
            "of a script from `export --script` (each text checked against its hash; a missing one is refused "
            "before the run).",
        },
    ),
    "allow_domains": (
        ("--allow-domain", "allow_domains"),
        {
            "multiple": True,
            "help": "Also let the browser reach this host (repeatable; *.example.org for subdomains).",
        },
    ),
    "policy_path": (
        ("--policy", "policy_path"),
        {
            "type": _PATH,
            "default": None,
            "help": "Policy TOML file (default: the settings' policy, else the built-in policy).",
        },
    ),
    # one folder everywhere: every command that writes, lists or looks up runs takes it, worded alike
    "runs_dir": (
        ("--runs-dir",),
        {
            "type": _PATH,
            "default": None,
            "metavar": "DIR",
            "help": "The folder of run directories, where runs are written and run ids looked up (default: "
            "CUA_TUI_RUNS_DIR, else the settings' runs_dir; `cua-tui locate` prints it).",
        },
    ),
    "max_turns": (("--max-turns",), {"type": _COUNT, "default": None, "help": "Override the policy's turn limit."}),
    "max_steps": (("--max-steps",), {"type": _COUNT, "default": None, "help": "Override the policy's step limit."}),
    "deadline": (
        ("--deadline",),
        {"type": _COUNT, "default": None, "help": "Override the policy's wall-clock limit, in seconds."},
    ),
    "audit_key": (
        ("--audit-key",),
        {
            "type": _PATH,
            "default": None,
            "help": "Key kept outside the run directory that signs the seal: HMAC secret file or Ed25519 PEM.",
        },
    ),
    "headless": (
        ("--headless",),
        {"is_flag": True, "help": "No TUI: print events as lines and decide with --on-confirm."},
    ),
    "theme": (
        ("--theme",),
        {"default": None, "help": "TUI theme (built-in, themes/ or your config folder's themes/)."},
    ),
    "operator": (
        ("--operator",),
        {
            "default": None,
            "callback": lambda ctx, param, value: operator_name(value),
            "help": "Who reviews, recorded with every decision a person makes (default: user@host): ASCII "
            "letters, digits and . - _ @.",
        },
    ),
    "on_confirm": (
        ("--on-confirm",),
        {
            "default": "reject",
            "show_default": True,
            "help": "Headless decisions: reject, approve, ask (y/n/k prompt) or approver:CMD (JSON on stdin, "
            '{"decision": "approve|reject|kill"} on stdout; timeout or bad answer = reject).',
        },
    ),
    "otel": (
        ("--otel",),
        {
            "metavar": "URL",
            "default": None,
            "callback": lambda ctx, param, value: otel_endpoint(value),
            "help": "Send the run's OpenTelemetry spans to this OTLP/HTTP endpoint (e.g. http://localhost:4318; "
            "default: the settings' otel_endpoint). No message or typed text is ever in a span.",
        },
    ),
}


# A team's queue: not a run's flag (``run`` takes every one of those), but the commands that reach the
# queue take it, worded alike.
QUEUE_HELP = (
    "A team's queue: a PostgreSQL URL such as postgresql://alice@db.example/cua (default: CUA_TUI_QUEUE, else the "
    "settings' queue). TLS is required unless the server is on this machine or the URL sets sslmode; who you are "
    "is the role the server authenticates."
)


def queue_flag(help: str = QUEUE_HELP) -> Callable[[F], F]:
    """``--queue URL`` (its value reaches the command as ``queue``)."""
    decorate: Callable[[F], F] = click.option("--queue", metavar="URL", default=None, help=help)
    return decorate


def otel_endpoint(value: str | None) -> str | None:
    """``--otel URL`` checked as the settings' ``otel_endpoint`` is: bad usage (exit 2) when it cannot be one."""
    if value is None:
        return None
    from ..config import check_otel_endpoint

    why = check_otel_endpoint(value.strip())
    if why is not None:
        raise click.BadParameter(why)
    return value.strip()


def operator_name(value: str | None) -> str | None:
    """``--operator NAME`` checked at entry: bad usage (exit 2) for a name that could pass for another."""
    if value is None:
        return None
    from ..core.text import operator_problem

    why = operator_problem(value)
    if why is not None:
        raise click.BadParameter(why)
    return value


def flag(name: str, **changes: Any) -> Callable[[F], F]:
    """The flag ``name`` as a click option, with this command's ``changes`` (its help, its default)."""
    decls, settings = FLAGS[name]
    decorate: Callable[[F], F] = click.option(*decls, **{**settings, **changes})
    return decorate


def run_flags(*names: str) -> Callable[[F], F]:
    """The flags ``names`` as click options, listed in ``--help`` in the order given."""

    def decorate(command: F) -> F:
        for name in reversed(names):
            command = flag(name)(command)
        return command

    return decorate


def run_options(values: Mapping[str, Any], **fixed: Any) -> RunOptions:
    """The RunOptions the parsed flags ``values`` make: each fills its field; a headless run decides by
    --on-confirm, a TUI run through the handshake. ``fixed`` is what the command sets itself (the demo's
    script, the fleet's settings) and wins over a flag."""
    # Imported here, not at the top: the builder pulls in the core, and --help should start fast.
    from ..build import HANDSHAKE, RunOptions

    fields = {name: value for name, value in values.items() if name in FLAGS and name not in DRIVING}
    decisions = values["on_confirm"] if values.get("headless") else HANDSHAKE
    return RunOptions(**{**fields, "decisions": decisions, **fixed})
