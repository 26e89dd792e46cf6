"""Command line: run, verify, runs, locate, policy.

Exit codes: ``run`` 0 when the run ended passed (or finished where no verifier exists), 1 for any other
end, 2 for bad usage or configuration. ``verify`` 0 intact, 1 tampered, 2 unusable input.
Heavy and vendor imports happen inside the commands that need them, so ``--help`` starts fast.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import click

from . import __version__

EXIT_USAGE = 2


class UsageFailure(click.ClickException):
    """Bad usage or configuration: exit status 2, message on stderr."""

    exit_code = EXIT_USAGE


def _settings():
    from .config import ConfigError, Settings

    try:
        return Settings.load()
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="cua-tui")
def main() -> None:
    """Supervise computer-use agents: every proposed action is classified by a policy, risky ones wait
    for your decision (y approve, n reject, k kill switch), and every run leaves a hash-chained audit
    log that `cua-tui verify` checks offline."""


# ---------------------------------------------------------------------------------------------------
# run / demo
# ---------------------------------------------------------------------------------------------------
def _lab_names() -> list[str]:
    from .labs import LABS

    return list(LABS)


def _execute(
    *,
    task: str,
    backend: str,
    screen: str,
    agent_spec: str | None,
    script_data: dict | None,
    agent_label: str | None,
    lab_name: str | None,
    model: str | None = None,
    base_url: str | None = None,
    url: str | None,
    allow_domains: tuple[str, ...],
    policy_path: Path | None,
    runs_dir: Path | None,
    limits: dict,
    audit_key: Path | None,
    on_confirm: str,
    headless: bool = True,
    theme: str | None = None,
) -> None:
    """Build everything from the flags, run in the TUI (or headless), exit with the run's status code."""
    from .agents.script import Script, ScriptAgent, ScriptError
    from .approvers import headless_approver
    from .core.audit import AuditKey, AuditKeyError
    from .core.geometry import Size
    from .core.policy import Policy, PolicyError
    from .core.rundir import RunDir
    from .core.supervisor import RunConfig, Supervisor
    from .factory import UnavailableError, make_agent, make_desktop, public_url, versions
    from .headless import printer

    settings = _settings()
    try:
        size = Size.parse(screen)
    except ValueError as exc:
        raise UsageFailure(str(exc)) from None
    from .core.allowlist import AllowList, AllowListError

    try:  # the same grammar as the policy file's allow_domains and the proxy: refused here, not at start
        AllowList.parse(allow_domains)
    except AllowListError as exc:
        raise UsageFailure(f"--allow-domain: {exc}") from None
    lab = None
    if lab_name:
        from .labs import get_lab

        try:
            lab = get_lab(lab_name)
        except ValueError as exc:
            raise UsageFailure(str(exc)) from None
    try:
        path = policy_path or settings.policy
        policy = Policy.load(path) if path else Policy.default()
        policy = policy.with_limits(**limits)
        if lab is not None:
            policy = policy.with_regions(lab.regions())
    except PolicyError as exc:
        raise UsageFailure(str(exc)) from None
    runs = (runs_dir or settings.runs_dir).expanduser()
    try:
        key = AuditKey.load(audit_key, for_signing=True) if audit_key else None
    except AuditKeyError as exc:
        raise UsageFailure(str(exc)) from None
    if key is not None and not key.can_sign:
        raise UsageFailure(f"audit key {audit_key}: a public key cannot sign; pass the private key or an HMAC secret")
    if audit_key is not None and audit_key.resolve().is_relative_to(runs.resolve()):
        raise UsageFailure(
            f"audit key {audit_key}: inside the runs directory {runs}, where run directories are shared and read; "
            "keep the key elsewhere (e.g. the config folder, `cua-tui locate`)"
        )
    try:
        if headless:
            approver = headless_approver(on_confirm)
        else:
            from .core.approvers import HandshakeApprover

            approver = HandshakeApprover(by="human (TUI)")
        if script_data is not None:
            agent = ScriptAgent(Script.from_data(script_data, source=agent_label or "<script>"))
            label = agent_label or "script"
        else:
            assert agent_spec is not None
            agent, label = make_agent(agent_spec, model=model, base_url=base_url, policy=policy, settings=settings)
        desktop = make_desktop(backend, size, lab=lab, url=url, allow_domains=(*policy.allow_domains, *allow_domains))
    except (ValueError, ScriptError, UnavailableError) as exc:
        raise UsageFailure(str(exc)) from None
    try:
        rundir = RunDir.create(runs)
    except OSError as exc:
        raise UsageFailure(f"runs directory {runs}: {exc.strerror or exc}") from None
    extra = {
        "model_base_url": public_url(getattr(agent, "base_url", None)),
        "lab": lab_name,
        "url": url,
        "allow_domains": list(allow_domains),
        "lab_regions": lab.regions() if lab is not None else [],
    }
    config = RunConfig(
        task=task or (lab.task if lab is not None else "scripted run"),
        backend=backend,
        agent=label,
        model=agent.model,
        screen=size,
        policy=policy,
        audit_key=key,
        extra=extra,
        versions=versions(),
    )
    try:
        supervisor = Supervisor(
            config, desktop, agent, approver, rundir, listeners=() if not headless else (printer(sys.stderr),)
        )
    except OSError as exc:
        raise click.ClickException(f"run directory {rundir.path}: cannot write it ({exc.strerror or exc})") from None
    if not headless:
        result = _run_in_tui(supervisor, approver, theme, settings)
        click.echo(f"status: {result.status} · {result.reason}", err=True)
        click.echo(f"run directory: {result.path}", err=True)
        sys.exit(result.exit_code)
    click.echo(f"run {rundir.run_id} · {rundir.path}", err=True)
    result = _run_with_interrupt(supervisor)
    click.echo(f"status: {result.status} · {result.reason}", err=True)
    click.echo(f"run directory: {result.path}", err=True)
    sys.exit(result.exit_code)


@main.command()
@click.option("--task", default="", help="What the agent should do (sent to the model; a lab has its own).")
@click.option(
    "--backend",
    default="local",
    show_default=True,
    type=click.Choice(["local", "cwsandbox", "docker", "dry", "sim"]),
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
    help="Model name for the openai/anthropic agents (default: gpt-5.6-sol for openai, claude-sonnet-5 for "
    "anthropic). Keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY or the settings file.",
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
@click.option("--headless", is_flag=True, help="No TUI: print events as lines and decide with --on-confirm.")
@click.option("--theme", default=None, help="TUI theme (built-in, themes/ or your config folder's themes/).")
@click.option(
    "--on-confirm",
    default="reject",
    show_default=True,
    help="Headless decisions: reject, approve, ask (y/n/k prompt) or approver:CMD (JSON on stdin, "
    '{"decision": "approve|reject|kill"} on stdout; timeout or bad answer = reject).',
)
def run(
    task: str,
    backend: str,
    screen: str,
    agent_spec: str,
    model: str | None,
    base_url: str | None,
    lab_name: str | None,
    url: str | None,
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
) -> None:
    """Run an agent on a sandboxed desktop under supervision, in the TUI (or --headless).

    Every action the agent proposes is parsed strictly, classified by the policy (allow, confirm, block),
    and executed only if allowed or approved. The run directory (run.json, audit.jsonl, screens/,
    transcript.jsonl, result.json) is written under --runs-dir. Exit status: 0 passed or finished, 1 any
    other end (failed, killed, limit, error), 2 bad usage or configuration.
    """
    if (model or base_url) and agent_spec not in ("openai", "anthropic"):
        unused = [n for n, v in (("--model", model), ("--base-url", base_url)) if v]
        raise UsageFailure(f"{', '.join(unused)}: only for the openai and anthropic agents, not {agent_spec}")
    if lab_name and url:
        raise UsageFailure("--lab and --url: choose one")
    _execute(
        task=task,
        backend=backend,
        screen=screen,
        agent_spec=agent_spec,
        script_data=None,
        agent_label=None,
        lab_name=lab_name,
        model=model,
        base_url=base_url,
        url=url,
        allow_domains=allow_domains,
        policy_path=policy_path,
        runs_dir=runs_dir,
        limits={"max_turns": max_turns, "max_steps": max_steps, "deadline_seconds": deadline},
        audit_key=audit_key,
        on_confirm=on_confirm,
        headless=headless,
        theme=theme,
    )


@main.command()
@click.option("--lab", "lab_name", default="form", show_default=True, help="Which lab: form, search-export, injection.")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run directories go.")
@click.option("--screen", default="1024x720", show_default=True, help="Screen size WIDTHxHEIGHT.")
@click.option("--headless", is_flag=True, help="No TUI: print events as lines and decide with --on-confirm.")
@click.option("--theme", default=None, help="TUI theme (built-in, themes/ or your config folder's themes/).")
@click.option(
    "--on-confirm",
    default=None,
    help="Headless decisions: ask (default on a terminal), reject (default otherwise), approve, or approver:CMD.",
)
@click.option("--script-variant", default=None, hidden=True, help="Another scripted variant of the lab (tests).")
def demo(
    lab_name: str,
    runs_dir: Path | None,
    screen: str,
    headless: bool,
    theme: str | None,
    on_confirm: str | None,
    script_variant: str | None,
) -> None:
    """Offline first run: the local desktop, a lab, and that lab's SCRIPTED agent (no model, no key).

    The scripted turns solve the lab; they still stop at every confirmation point like any run, and the
    lab's own server decides whether the run passed. Exit status as for `run`.
    """
    import json

    from .labs import get_lab

    try:
        lab = get_lab(lab_name)
    except ValueError as exc:
        raise UsageFailure(str(exc)) from None
    script_file = lab.script_file(script_variant)
    if on_confirm is None:
        on_confirm = "ask" if sys.stdin.isatty() else "reject"
    click.echo(
        f"SCRIPTED DEMO · lab {lab_name} · agent: recorded turns from {script_file.name} "
        f"(no model, no API key) · decisions: {on_confirm}",
        err=True,
    )
    _execute(
        task=lab.task,
        backend="local",
        screen=screen,
        agent_spec=None,
        script_data=json.loads(script_file.read_text()),
        agent_label=f"script:{script_file} (scripted demo)",
        lab_name=lab_name,
        url=None,
        allow_domains=(),
        policy_path=None,
        runs_dir=runs_dir,
        limits={},
        audit_key=None,
        on_confirm=on_confirm,
        headless=headless,
        theme=theme,
    )


def _run_in_tui(supervisor, approver, theme, settings):
    """Open the supervision TUI on a live run. Leaving the TUI while the run is going presses the kill switch."""
    from .tui.app import SupervisorApp, graphics_widget
    from .tui.source import LiveRun

    app = SupervisorApp(
        LiveRun(supervisor, approver),
        theme=theme or settings.theme,
        theme_dirs=(settings.themes_dir,),
        graphics=graphics_widget(),
    )
    app.run()
    if supervisor.result is None:  # the user left (ctrl+q) before the end: that is a kill
        supervisor.kill(by="human (left the TUI)")
    result = supervisor.wait(60)
    if result is None:
        raise click.ClickException("the run did not end within 60 s after the TUI closed")
    return result


def _run_with_interrupt(supervisor):
    """Run in a worker thread; Ctrl-C (SIGINT), SIGTERM or SIGHUP (the terminal went away) press the kill switch."""
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", supervisor.run()), name="cua-run", daemon=True)

    def on_signal(signum, frame):
        supervisor.kill(by="signal " + signal.Signals(signum).name)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if "result" not in box:  # run() ends every run itself; this is the last line of defence
        raise click.ClickException("the run ended without a result (see audit.jsonl in its run directory)")
    return box["result"]


# ---------------------------------------------------------------------------------------------------
# verify / runs / locate / policy
# ---------------------------------------------------------------------------------------------------
@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--key",
    type=click.Path(path_type=Path),
    default=None,
    help="The audit key the run was signed with (HMAC secret, or Ed25519 private/public PEM).",
)
def verify(run_dir: Path, key: Path | None) -> None:
    """Check a run directory for tampering.

    Recomputes the hash chain of audit.jsonl, checks the seal in result.json (event count and head hash,
    so truncation shows), the seal's signature when --key is given (so a recomputed chain shows), and every
    referenced screenshot. Exit status: 0 intact, 1 tampered (the first bad line and why), 2 unusable
    input. A run without result.json (interrupted) verifies as a prefix and is reported unsealed, with
    the actions whose outcome is unknown; with --key it exits 1 (nothing signed vouches for its end) and
    says up to which signed checkpoint it is covered. Links, FIFOs and devices in a run directory are
    refused, never followed; files and lines are read with size caps.
    """
    from .core.audit import AuditKey, AuditKeyError, VerifyExit, verify_run
    from .core.text import visible

    try:
        audit_key = AuditKey.load(key) if key else None
    except AuditKeyError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(VerifyExit.UNUSABLE)
    report = verify_run(run_dir, audit_key)
    stream_err = report.code != VerifyExit.INTACT
    # the summary quotes the run directory's own text (run ids, paths): shown literally, never as escapes
    click.echo(visible(report.summary), err=stream_err)
    for note in report.notes:
        click.echo(f"note: {visible(note)}", err=stream_err)
    sys.exit(report.code)


@main.command()
@click.option("--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run directories are.")
@click.option("--no-check", is_flag=True, help="Skip checking each run's audit chain.")
def runs(runs_dir: Path | None, no_check: bool) -> None:
    """List runs: id, date, task, status, steps, verified (task) and audit (chain check).

    AUDIT is intact, unsealed (interrupted; with the number of actions whose outcome is unknown),
    TAMPERED or unusable (`cua-tui verify RUN` says why)."""
    import stat

    from .core.audit import VerifyExit, verify_run
    from .core.rundir import RUN_ID_RE
    from .core.safeio import RunFileError, RunFolder
    from .core.text import visible

    def read(run: RunFolder, name: str) -> dict | None:
        """A run's JSON file through safeio: {} when absent, None when hostile or not an object."""
        try:
            data = run.read_json(name)
        except RunFileError as exc:
            return {} if exc.reason == "missing" else None
        return data if isinstance(data, dict) else None

    def audit_cell(run: RunFolder) -> str:
        if no_check:
            return "-"
        report = verify_run(run)
        if report.code != VerifyExit.INTACT:
            return "TAMPERED" if report.code == VerifyExit.TAMPERED else "unusable"
        if report.sealed:
            return "intact"
        unknown = len(report.unknown_outcomes)
        return f"unsealed, {unknown} unknown" if unknown else "unsealed"

    def row(name: str, info: dict | None, result: dict | None, audit: str) -> tuple[str, ...]:
        status = "?" if result is None else str(result.get("status", "unfinished"))
        info, result = info or {}, result or {}
        counts = result.get("counts")
        verified = result.get("verified")
        cells = (
            name,
            name[:8],
            str(info.get("task", "?")),
            status,
            str(counts.get("steps", "-") if isinstance(counts, dict) else "-"),
            "-" if verified is None else "yes" if verified is True else "no",
            audit,
        )
        # a run directory is untrusted: its name and files are shown literally, never as escapes
        return tuple(visible(cell, limit=limit) for cell, limit in zip(cells, (40, 8, 40, 20, 8, 8, 40), strict=True))

    folder = runs_dir or _settings().runs_dir
    try:
        top = RunFolder.open(folder, follow_link=True)
    except RunFileError:
        click.echo(f"no runs in {visible(str(folder))}")
        return
    rows = []
    with top:
        for name, mode in top.entries():
            if stat.S_ISLNK(mode) and RUN_ID_RE.match(name):  # a run's name, but a link: never followed
                rows.append(row(name, None, None, "-" if no_check else "unusable"))
                continue
            if not stat.S_ISDIR(mode):
                continue
            try:
                run = top.subdir(name)
            except RunFileError:
                rows.append(row(name, None, None, "-" if no_check else "unusable"))
                continue
            with run:
                try:
                    if run.kind("audit.jsonl") is None:
                        continue
                except RunFileError:
                    rows.append(row(name, None, None, "-" if no_check else "unusable"))
                    continue
                rows.append(row(name, read(run, "run.json"), read(run, "result.json"), audit_cell(run)))
    header = ("RUN", "DATE", "TASK", "STATUS", "STEPS", "VERIFIED", "AUDIT")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for cells in [header, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip())


@main.command()
def locate() -> None:
    """Print where settings, themes and runs live."""
    settings = _settings()
    click.echo(f"config file: {settings.config_file}")
    click.echo(f"themes:      {settings.themes_dir}")
    click.echo(f"runs:        {settings.runs_dir}")


@main.command("policy")
@click.option("--print", "print_default", is_flag=True, help="Print the built-in policy as TOML.")
@click.option(
    "--check",
    "check_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Validate a policy file and summarise it.",
)
def policy_cmd(print_default: bool, check_path: Path | None) -> None:
    """Show the built-in policy, or check a policy file (exit 2 with the line of the error)."""
    from .core.policy import DEFAULT_POLICY_TOML, Policy, PolicyError
    from .core.text import visible

    if print_default:
        click.echo(DEFAULT_POLICY_TOML, nl=False)
        return
    try:
        policy = Policy.load(check_path) if check_path else Policy.default()
    except PolicyError as exc:
        raise UsageFailure(visible(str(exc))) from None
    lines = policy.summary()
    if policy.description:
        lines.insert(1, f"description: {policy.description}")
    lines += [f"region {r.name} reason: {r.reason}" for r in policy.regions]
    # Names, descriptions, reasons and the path come from the file: shown literally, never as escapes.
    for line in lines:
        click.echo(visible(line))


if __name__ == "__main__":
    main()
