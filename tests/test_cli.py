"""The command line: --help everywhere, headless runs and their exit codes, clear usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_tui.agents.vendors import VENDORS
from cua_tui.cli import main
from cua_tui.core.ports import process_user
from cua_tui.desktops import BACKENDS

README = Path(__file__).resolve().parents[1] / "README.md"

FORM = {
    "turns": [
        {
            "text": "filling",
            "actions": [
                {"type": "click", "x": 250, "y": 182},
                {"type": "type", "text": "cua-tui verified"},
                {"type": "click", "x": 550, "y": 182},
            ],
        },
    ],
    "final_text": "done",
}


def write(tmp_path: Path, data: object, name: str = "script.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.mark.parametrize("command", [[], ["run"], ["verify"], ["runs"], ["locate"], ["policy"]])
def test_every_command_explains_itself(command: list[str]) -> None:
    code, out = invoke(*command, "--help")
    assert code == 0
    assert "Usage:" in out
    assert len(out.splitlines()) > 4


def test_defaults_in_help_and_readme_are_the_code_defaults() -> None:
    _, out = invoke("run", "--help")
    help_text = " ".join(out.split())
    assert "[" + "|".join(BACKENDS) + "]" in help_text
    readme = " ".join(README.read_text().split())
    openai, anthropic = VENDORS["openai"].default_model, VENDORS["anthropic"].default_model
    assert f"default `{openai}` for OpenAI, `{anthropic}` for Anthropic" in readme
    # click wraps the help at hyphens: compare without line breaks and the spaces they leave
    assert f"default: {openai} for openai, {anthropic} for anthropic" in help_text.replace("- ", "-")


def test_run_help_documents_exit_codes_and_on_confirm() -> None:
    _, out = invoke("run", "--help")
    assert "0 passed or finished" in out
    assert "approver:CMD" in out


def test_headless_run_passes_with_approvals(tmp_path: Path) -> None:
    script = write(tmp_path, FORM)
    code, out = invoke(
        "run",
        "--headless",
        "--backend",
        "sim",
        "--agent",
        f"script:{script}",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--on-confirm",
        "approve",
        "--task",
        "fill the form",
    )
    assert code == 0, out
    # The end line says who checked the status, and where: the sim's form server is in this (the controller's)
    # process.
    checked = f"checked by sim form server in the controller, as {process_user()}"
    assert f"status: passed · the form server recorded the phrase (1 submission(s)) · {checked}\n" in out
    (run_dir,) = (tmp_path / "runs").iterdir()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "passed" and result["verified"] is True
    assert result["verifier"] == {"name": "sim form server", "where": "controller", "user": process_user()}
    assert json.loads((run_dir / "run.json").read_text())["task"] == "fill the form"


def test_headless_default_rejects_and_run_fails(tmp_path: Path) -> None:
    script = write(tmp_path, FORM)
    code, out = invoke(
        "run", "--headless", "--backend", "sim", "--agent", f"script:{script}", "--runs-dir", str(tmp_path / "runs")
    )
    assert code == 1
    # Each line names its action, not only its number.
    assert "  #1 click at (250, 182): executed\n" in out
    assert "  #2 type 16 characters: decision: reject (by headless rule: reject)\n" in out
    assert "  #2 type 16 characters: declined · Declined by the user. Do not retry this action.\n" in out
    assert "  #3 click at (550, 182): not_executed · Not executed: an earlier action in this turn did not run." in out
    assert f"! checked by sim form server in the controller, as {process_user()}: failed" in out  # stands apart
    assert "status: failed" in out and f"checked by sim form server in the controller, as {process_user()}" in out


def test_dry_backend_finishes_without_verifier(tmp_path: Path) -> None:
    script = write(tmp_path, FORM)
    code, out = invoke(
        "run",
        "--headless",
        "--backend",
        "dry",
        "--screen",
        "800x600",
        "--agent",
        f"script:{script}",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--on-confirm",
        "approve",
    )
    assert code == 0, out
    assert "status: finished" in out and "checked by" not in out  # no verifier: nobody checked it
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert json.loads((run_dir / "result.json").read_text())["verifier"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--screen", "huge"], "is not WIDTHxHEIGHT"),
        (["--policy", "{missing}"], "cannot read it"),
        (["--agent", "script:{missing}"], "cannot read it"),
        (["--agent", "script:{notjson}"], "not valid JSON (line 1"),
        (["--agent", "script:{badshape}"], '"turns" must be a list'),
        (["--on-confirm", "maybe"], "--on-confirm must be"),
        (["--audit-key", "{missing}"], "audit key"),
        (["--backend", "local"], "needs --lab NAME or --url URL"),
        (["--backend", "cwsandbox"], "needs --lab NAME or --url URL"),
        (["--backend", "cwsandbox", "--lab", "form"], "needs an API key: set CWSANDBOX_API_KEY"),
        (["--backend", "docker"], "needs --lab NAME or --url URL"),
        (["--backend", "local", "--lab", "nope"], "unknown lab"),
        (["--agent", "openai"], "no task: the model has nothing to do"),  # the real reason before the key
        (["--agent", "openai", "--task", "t"], "needs an API key: set OPENAI_API_KEY"),
        (["--agent", "anthropic", "--task", "t"], "needs an API key: set ANTHROPIC_API_KEY"),
        (["--agent", "nonsense"], "unknown agent 'nonsense'"),
        (["--allow-domain", "127.1"], "--allow-domain: allow-list entry '127.1'"),
        (["--allow-domain", "*.1"], "--allow-domain: allow-list entry '*.1'"),
        (["--allow-domain", "[::1"], "--allow-domain: allow-list entry '[::1'"),
        (["--max-steps", str(10**10)], "--max-steps"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    for variable in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "CWSANDBOX_API_KEY",
    ):  # a key must not make a bad-usage case run
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "no-settings.toml"))
    paths = {
        "missing": str(tmp_path / "nope"),
        "notjson": str(write(tmp_path, "{turns", "bad.json")),
        "badshape": str(write(tmp_path, {"turns": {}}, "shape.json")),
    }
    script = write(tmp_path, FORM)
    base = [
        "run",
        "--headless",
        "--backend",
        "sim",
        "--agent",
        f"script:{script}",
        "--runs-dir",
        str(tmp_path / "runs"),
    ]
    code, out = invoke(*base, *[a.format(**paths) for a in args])
    assert code == 2, out
    assert message in out
    assert "Traceback" not in out
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_broken_policy_names_the_line(tmp_path: Path) -> None:
    policy = write(tmp_path, 'version = 1\n\n[limits]\nmax_turns = "ten"\n', "p.toml")
    code, out = invoke("policy", "--check", str(policy))
    assert code == 2
    assert "line 4" in out and "max_turns" in out
    script = write(tmp_path, FORM)
    code, out = invoke(
        "run",
        "--headless",
        "--backend",
        "sim",
        "--agent",
        f"script:{script}",
        "--policy",
        str(policy),
        "--runs-dir",
        str(tmp_path / "runs"),
    )
    assert code == 2 and "line 4" in out


def test_limit_flags_override_policy(tmp_path: Path) -> None:
    script = write(tmp_path, FORM)
    code, out = invoke(
        "run",
        "--headless",
        "--backend",
        "sim",
        "--agent",
        f"script:{script}",
        "--max-steps",
        "1",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--on-confirm",
        "approve",
    )
    assert code == 1
    assert "status: limit" in out and "step limit of 1" in out


def test_policy_print_is_the_builtin_policy_and_parses(tmp_path: Path) -> None:
    code, out = invoke("policy", "--print")
    assert code == 0
    policy = write(tmp_path, out, "default.toml")
    code, summary = invoke("policy", "--check", str(policy))
    assert code == 0 and "confirm: type" in summary


def test_runs_lists_runs_with_status_and_audit(tmp_path: Path) -> None:
    script = write(tmp_path, FORM)
    runs = tmp_path / "runs"
    invoke(
        "run",
        "--headless",
        "--backend",
        "sim",
        "--agent",
        f"script:{script}",
        "--runs-dir",
        str(runs),
        "--on-confirm",
        "approve",
        "--task",
        "evil \x1b[2J task",
    )
    code, out = invoke("runs", "--runs-dir", str(runs))
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:6] == ["STATUS", "RECORD", "RUN", "STARTED", "DURATION", "TASK"]  # the verdict first
    assert header.split()[-5:] == ["CHECKED", "IN", "REASON", "STEPS", "DECISIONS"]
    assert row.startswith("passed  intact  ") and f"  controller, as {process_user()}  the form server recorded" in row
    assert "\x1b" not in out and "␛[2J" in out


def test_sigint_is_the_kill_switch(tmp_path: Path) -> None:
    """A real process: SIGINT while the run waits for a decision ends it `killed`, sealed, exit 1."""
    script = write(tmp_path, FORM)
    approver = tmp_path / "slow.py"
    approver.write_text("import time\ntime.sleep(30)\n")
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cua_tui.cli",
            "run",
            "--headless",
            "--backend",
            "sim",
            "--agent",
            f"script:{script}",
            "--runs-dir",
            str(runs),
            "--on-confirm",
            f"approver:{sys.executable} {approver}",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "CONFIRM" in line:
            break
    proc.send_signal(2)
    rest = proc.communicate(timeout=20)[1]
    assert proc.returncode == 1
    assert "KILL SWITCH" in rest and "status: killed" in rest
    (run_dir,) = runs.iterdir()
    assert json.loads((run_dir / "result.json").read_text())["status"] == "killed"
    code, _ = invoke("verify", str(run_dir))
    assert code == 0


def test_url_allow_entries() -> None:
    from cua_tui.desktops.egress import AllowList
    from cua_tui.desktops.target import Target, url_allow_entry

    assert url_allow_entry("http://localhost:8000/x") == ("http://127.0.0.1:8000/x", "127.0.0.1:8000")
    assert url_allow_entry("https://example.com/") == ("https://example.com/", "example.com:443")
    assert url_allow_entry("http://[::1]:8080/") == ("http://[::1]:8080/", "[::1]:8080")
    allow = AllowList.parse([url_allow_entry("http://[::1]:8080/")[1]])
    assert allow.judge("::1", 8080).allowed and not allow.judge("::1", 80).allowed
    # a page's target: its origin and the domains beyond it; nothing started
    start, allow = Target(url="http://localhost:8000/x", allow_domains=("docs.example.org",)).open()
    assert start == "http://127.0.0.1:8000/x" and allow.entries == ("127.0.0.1:8000", "docs.example.org")


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "javascript:alert(1)", "ftp://example.org/", "http://", "chrome://settings"]
)
def test_a_url_that_is_not_http_is_refused_before_anything_starts(tmp_path: Path, url: str) -> None:
    runs = tmp_path / "runs"
    args = ["run", "--headless", "--task", "look", "--url", url, "--runs-dir", str(runs)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "--url must be an http:// or https:// URL" in result.output
    assert not runs.exists() or not any(runs.iterdir())  # no run directory was made


def test_an_unknown_theme_is_refused_with_the_themes_listed(tmp_path: Path) -> None:
    script = write(tmp_path, FORM)
    args = ["run", "--backend", "sim", "--agent", f"script:{script}", "--theme", "no-such-theme"]
    result = CliRunner().invoke(main, [*args, "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2
    assert "no such theme" in result.output and "cua-dark" in result.output and "cua-contrast" in result.output
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------------------------------------
# Issue 23, point 4: the run flags reach RunOptions from one place
# ---------------------------------------------------------------------------------------------------
def parsed(command: str, args: list[str]) -> dict[str, object]:
    """What click makes of ``args`` for ``command``: the values the command function receives."""
    cmd = main.commands[command]
    return dict(cmd.make_context(command, list(args)).params)


def test_run_fleet_and_demo_make_the_same_run_options_from_the_same_flags(tmp_path: Path) -> None:
    from cua_tui.build import HANDSHAKE
    from cua_tui.cli.flags import run_options

    runs, policy, key = tmp_path / "runs", tmp_path / "p.toml", tmp_path / "k"
    shared = ["--screen", "800x600", "--runs-dir", str(runs), "--operator", "ana@lab", "--theme", "cua-dark"]
    models = ["--backend", "sim", "--agent", "anthropic", "--model", "m-1", "--policy", str(policy)]
    headless = ["--headless", "--on-confirm", "approver:./ok.sh", "--audit-key", str(key)]
    tasks = ["--tasks", str(tmp_path / "t.toml"), "--concurrency", "3"]
    for args in (shared, [*shared, *models], [*shared, *models, *headless]):
        made = run_options(parsed("run", args))
        assert run_options(parsed("fleet", [*tasks, *args])) == made, args
    assert made.screen == "800x600" and made.runs_dir == runs and made.operator == "ana@lab"
    assert (made.backend, made.agent, made.model, made.policy_path) == ("sim", "anthropic", "m-1", policy)
    assert made.decisions == "approver:./ok.sh" and made.audit_key == key
    # the TUI decides through the handshake, whatever --on-confirm says
    assert run_options(parsed("run", ["--on-confirm", "approve"])).decisions == HANDSHAKE

    demo = ["--lab", "search-export", *shared, "--headless", "--on-confirm", "reject"]
    assert run_options(parsed("demo", demo)) == run_options(parsed("run", demo))
    assert run_options(parsed("demo", demo), agent=None).agent is None  # what the command sets wins


def test_every_run_flag_fills_a_run_option_or_drives_the_run() -> None:
    from dataclasses import fields

    from cua_tui.build import RunOptions
    from cua_tui.cli.flags import DRIVING, FLAGS

    assert set(FLAGS) - set(DRIVING) <= {f.name for f in fields(RunOptions)}
    # each command's own options: named arguments of its callback, or (the fleet's queue switches) among its
    # values beside the run flags
    own = {"run": set(), "fleet": {"tasks_path", "concurrency"}, "demo": set()}
    switches = {"fleet": {"detach", "retry", "queue"}}
    for command, extra in own.items():
        names = {p.name for p in main.commands[command].params if p.name != "help"}
        assert names - extra - switches.get(command, set()) <= set(FLAGS), command
        callback = main.commands[command].callback
        assert callback is not None and callback.__code__.co_argcount == len(extra), command


@pytest.mark.parametrize("value", ["../../../etc/passwd", "/etc/passwd", "no-such-script"])
def test_demo_takes_no_script_of_the_callers_naming(value: str) -> None:
    # ``--script-variant`` joined its value into a path unchecked and ended in a traceback (issue 34, point 8):
    # the option is gone, so any value is a usage error before anything is read or run
    code, out = invoke("demo", "--headless", "--script-variant", value)
    assert code == 2 and "No such option '--script-variant'" in out
    assert "Traceback" not in out and "script-variant" not in invoke("demo", "--help")[1]


# ---------------------------------------------------------------------------------------------------
# Issue 35, point 4: one runs folder everywhere
# ---------------------------------------------------------------------------------------------------
def test_every_command_that_writes_or_reads_runs_takes_the_same_runs_dir() -> None:
    takers = {
        name: next(p for p in command.params if "--runs-dir" in getattr(p, "opts", ()))
        for name, command in main.commands.items()
        if any("--runs-dir" in getattr(p, "opts", ()) for p in command.params)
    }
    assert set(takers) >= {"demo", "run", "fleet", "replay", "verify", "export", "runs", "stats", "sandboxes"}
    (help_text,) = {getattr(option, "help", None) for option in takers.values()}  # one wording, one option
    assert help_text is not None and "CUA_TUI_RUNS_DIR" in help_text
    assert {option.name for option in takers.values()} == {"runs_dir"}


def test_a_run_id_is_looked_up_in_runs_dir_and_one_not_found_names_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("CUA_TUI_RUNS_DIR", str(elsewhere))
    script = write(tmp_path, FORM)
    made = ["run", "--headless", "--backend", "sim", "--agent", f"script:{script}", "--task", "t", "--runs-dir"]
    assert invoke(*made, str(runs), "--on-confirm", "approve")[0] == 0
    (run_dir,) = runs.iterdir()
    run_id = run_dir.name
    assert invoke("verify", run_id, "--runs-dir", str(runs))[0] == 0
    assert invoke("verify", run_id[:15], "--runs-dir", str(runs))[0] == 0  # a unique beginning, too
    html = tmp_path / "r.html"
    assert invoke("export", run_id, "--runs-dir", str(runs), "--html", str(html))[0] == 0 and html.is_file()
    hint = "; --runs-dir DIR or CUA_TUI_RUNS_DIR looks up run ids in another folder (`cua-tui runs` lists them)\n"
    for command in ("verify", "replay", "export"):
        # without --runs-dir, the settings' folder (CUA_TUI_RUNS_DIR here): the error names it, and the way out
        result = CliRunner().invoke(main, [command, run_id, "--html", str(html)][: 2 + 2 * (command == "export")])
        assert result.exit_code == 2, (command, result.output)
        assert result.stderr == f"Error: no run {run_id} in {elsewhere}{hint}", command
    result = CliRunner().invoke(main, ["replay", "1999", "--runs-dir", str(runs)])
    assert result.exit_code == 2
    assert result.stderr == f"Error: 1999: no such run directory, and no run id in {runs} starts so{hint}"
    result = CliRunner().invoke(main, ["verify", "not-a-run", "--runs-dir", str(runs)])
    assert result.stderr == f"Error: not-a-run: no such run directory, nor the beginning of a run id in {runs}{hint}"
