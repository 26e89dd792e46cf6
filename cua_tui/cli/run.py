"""``cua-tui run``: an agent on a sandboxed desktop under supervision, in the TUI or headless."""

from __future__ import annotations

from pathlib import Path

import click

from ..agents.vendors import DEFAULT_MODELS
from ..desktops import BACKENDS
from .base import fail, headless_option, operator_option, theme_option


@click.command("run")
@click.option("--task", default="", help="What the agent should do (sent to the model; a lab has its own).")
@click.option(
    "--backend",
    default="local",
    show_default=True,
    type=click.Choice(BACKENDS),
    help="Desktop: local Xvfb+Chromium (needs --lab or --url), CoreWeave sandbox, Docker, dry (executes "
    "nothing, validates against a blank screen) or sim (in-process simulated form app).",
)
@click.option("--screen", default="1024x720", show_default=True, help="Screen size WIDTHxHEIGHT.")
@click.option(
    "--agent",
    "agent_spec",
    default="openai",
    show_default=True,
    help="openai, anthropic, or script:PATH (recorded turns; no model, no key).",
)
@click.option(
    "--model",
    default=None,
    help=f"Model name for the openai/anthropic agents (default: {DEFAULT_MODELS['openai']} for openai, "
    f"{DEFAULT_MODELS['anthropic']} for anthropic). Keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY or the "
    "settings file.",
)
@click.option(
    "--base-url",
    default=None,
    help="API base URL for the model, any compatible server (default: OPENAI_BASE_URL / ANTHROPIC_BASE_URL, "
    "else the vendor's).",
)
@click.option(
    "--lab",
    "lab_name",
    default=None,
    help="Fixture application with its own verifier (local desktop): form, search-export or injection.",
)
@click.option("--url", default=None, help="Page to open on the local desktop (its origin is allowed).")
@click.option(
    "--texts",
    type=click.Path(path_type=Path),
    default=None,
    help="With --agent script:PATH: a JSON file mapping SHA-256 to typed text, filling the placeholders of a "
    "script from `export --script` (each text checked against its hash; a missing one is refused before the run).",
)
@click.option(
    "--allow-domain",
    "allow_domains",
    multiple=True,
    help="Also let the browser reach this host (repeatable; *.example.org for subdomains).",
)
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Policy TOML file (default: the settings' policy, else the built-in policy).",
)
@click.option("--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run directories go.")
@click.option("--max-turns", type=click.IntRange(1, 10**9), default=None, help="Override the policy's turn limit.")
@click.option("--max-steps", type=click.IntRange(1, 10**9), default=None, help="Override the policy's step limit.")
@click.option(
    "--deadline",
    type=click.IntRange(1, 10**9),
    default=None,
    help="Override the policy's wall-clock limit, in seconds.",
)
@click.option(
    "--audit-key",
    type=click.Path(path_type=Path),
    default=None,
    help="Key kept outside the run directory that signs the seal: HMAC secret file or Ed25519 PEM.",
)
@headless_option
@theme_option
@operator_option
@click.option(
    "--on-confirm",
    default="reject",
    show_default=True,
    help="Headless decisions: reject, approve, ask (y/n/k prompt) or approver:CMD (JSON on stdin, "
    '{"decision": "approve|reject|kill"} on stdout; timeout or bad answer = reject).',
)
def command(
    task: str,
    backend: str,
    screen: str,
    agent_spec: str,
    model: str | None,
    base_url: str | None,
    lab_name: str | None,
    url: str | None,
    texts: Path | None,
    allow_domains: tuple[str, ...],
    policy_path: Path | None,
    runs_dir: Path | None,
    max_turns: int | None,
    max_steps: int | None,
    deadline: int | None,
    audit_key: Path | None,
    headless: bool,
    on_confirm: str,
    theme: str | None,
    operator: str | None,
) -> None:
    """Run an agent on a sandboxed desktop under supervision, in the TUI (or --headless).

    Every action the agent proposes is parsed strictly, classified by the policy (allow, confirm, block),
    and executed only if allowed or approved. The run directory (run.json, audit.jsonl, screens/,
    transcript.jsonl, result.json) is written under --runs-dir. Exit status: 0 passed or finished, and
    sealed; 1 any other end (failed, killed, limit, error, or a seal that could not be written: the run
    ends error and says why in one line); 2 bad usage or configuration.
    """
    if (model or base_url) and agent_spec not in ("openai", "anthropic"):
        unused = [n for n, v in (("--model", model), ("--base-url", base_url)) if v]
        fail(f"{', '.join(unused)}: only for the openai and anthropic agents, not {agent_spec}")
    if lab_name and url:
        fail("--lab and --url: choose one")
    # Imported here, not at the top: the builder pulls in the core, and --help should start fast.
    from ..build import HANDSHAKE, RunOptions
    from .session import execute

    execute(
        RunOptions(
            task=task,
            backend=backend,
            screen=screen,
            agent=agent_spec,
            model=model,
            base_url=base_url,
            lab=lab_name,
            url=url,
            texts=texts,
            allow_domains=allow_domains,
            policy_path=policy_path,
            runs_dir=runs_dir,
            max_turns=max_turns,
            max_steps=max_steps,
            deadline=deadline,
            audit_key=audit_key,
            decisions=on_confirm if headless else HANDSHAKE,
            operator=operator,
        ),
        headless=headless,
        theme=theme,
    )
