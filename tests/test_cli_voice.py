"""One voice on the command line (issue 22, points 9 and 10): every command's error in one form
(`Error: PATH: REASON; HINT`, one line), the real reason first, `runs` without a wrapped row at 80 columns,
and a run's last lines naming the commands that come next, which work as printed."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shlex
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cua_tui.cli import main
from cua_tui.cli.base import program
from cua_tui.cli.runs import HEADER, RunEntry, layout

FORM = {
    "turns": [
        {
            "actions": [
                {"type": "click", "x": 250, "y": 182},
                {"type": "type", "text": "cua-tui verified"},
                {"type": "click", "x": 550, "y": 182},
            ]
        }
    ],
    "final_text": "done",
}
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CWSANDBOX_API_KEY")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Settings isolated from the user's: no config file, the runs directory under tmp_path, no keys,
    and no `cua-tui` on PATH (the next steps then name this interpreter, which the test can run)."""
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    return {"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(tmp_path / "runs")}


def cli(env: dict[str, str], *args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def html_for(cmd: str, out: Path) -> list[str | Path]:
    """The output ``export`` needs (the other commands take none)."""
    return ["--html", out] if cmd == "export" else []


def one_error(result: Result, code: int = 2) -> str:
    """The one form: exit status, nothing on stdout, one line on stderr starting `Error: `."""
    assert result.exit_code == code, result.output
    assert result.stdout == "", result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and "Traceback" not in result.stderr
    return lines[0]


def script_file(tmp_path: Path) -> Path:
    path = tmp_path / "a folder" / "scripts" / "form.json"  # an absolute path, with a space, for AGENT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(FORM))
    return path


def headless_run(env: dict[str, str], tmp_path: Path, *extra: str) -> Result:
    task = "fill the verification form with the phrase and press the Verify button, then stop"
    base = ["run", "--headless", "--backend", "sim", "--agent", f"script:{script_file(tmp_path)}"]
    return cli(env, *base, "--on-confirm", "approve", "--task", task, *extra)


# ---------------------------------------------------------------------------------------------------
# Point 10: one error form, the real reason first
# ---------------------------------------------------------------------------------------------------
def test_the_same_bad_folder_gets_the_same_error_from_every_command(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "notes"
    bad.mkdir()
    (bad / "todo.txt").write_text("not a run")
    expected = (
        f"Error: {bad}: no audit.jsonl (not a cua-tui run directory); "
        "give a run directory or a run id (`cua-tui runs` lists them)"
    )
    said = {
        "verify": one_error(cli(env, "verify", bad)),
        "replay": one_error(cli(env, "replay", bad)),
        "export": one_error(cli(env, "export", bad, "--html", tmp_path / "x.html")),
        # the folder's problem before the output's place: it is the real one
        "export inside": one_error(cli(env, "export", bad, "--html", bad / "x.html")),
    }
    assert said == dict.fromkeys(said, expected)
    assert sorted(p.name for p in bad.iterdir()) == ["todo.txt"] and not (tmp_path / "x.html").exists()

    gone = tmp_path / "gone"
    missing = {
        cmd: one_error(cli(env, cmd, gone, *html_for(cmd, tmp_path / "y.html")))
        for cmd in ("verify", "replay", "export")
    }
    assert set(missing.values()) == {
        f"Error: {gone}: no such run directory; give a run directory or a run id (`cua-tui runs` lists them)"
    }
    by_id = one_error(cli(env, "verify", "20991231-000000-abcdef"))
    assert by_id.startswith("Error: no run 20991231-000000-abcdef in ") and "`cua-tui runs` lists them" in by_id

    # the other commands, on the same folder or a file: the same prefix, the path, the reason
    stop = one_error(cli(env, "sandboxes", "--backend", "docker", "--stop", bad))  # before any engine is asked
    assert stop.startswith(f"Error: {bad}: no readable sandbox-id.txt (does not exist); ")
    unreadable: list[list[str | Path]] = [["fleet", "--tasks", bad], ["policy", "--check", bad]]
    for args in unreadable:
        line = one_error(cli(env, *args))
        assert str(bad) in line and "cannot read it" in line, line
    file = bad / "todo.txt"
    listed = one_error(cli(env, "runs", "--runs-dir", file))
    assert listed.startswith(f"Error: {file}: not a runs directory (a regular file, not a directory); ")
    assert one_error(cli(env, "demo", "--lab", "nope")).startswith("Error: unknown lab 'nope'; choose one of form")
    run_policy: list[str | Path] = [
        "run",
        "--backend",
        "sim",
        "--agent",
        f"script:{script_file(tmp_path)}",
        "--policy",
        bad,
    ]
    assert str(bad) in one_error(cli(env, *run_policy))


def test_a_path_with_escapes_is_shown_literally_in_the_error(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "\x1b]52;c;SGk=\x07"
    bad.mkdir()
    for cmd in ("verify", "replay", "export"):
        line = one_error(cli(env, cmd, bad, *html_for(cmd, tmp_path / "z.html")))
        assert "\x1b" not in line and "\x07" not in line and "␛]52;c;SGk=␇: no audit.jsonl" in line


def test_run_with_nothing_to_do_says_so_before_asking_for_a_key(env: dict[str, str], tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for args in (["run"], ["run", "--headless"], ["run", "--backend", "sim", "--agent", "anthropic"]):
        line = one_error(cli(env, *args))
        assert line.startswith("Error: no task: the model has nothing to do; give --task TEXT"), line
        assert "API key" not in line
    keyless = one_error(cli(env, "run", "--backend", "sim", "--task", "fill the form"))
    assert "needs an API key: set OPENAI_API_KEY" in keyless  # with a task, the key is the real reason
    lab = one_error(cli(env, "run", "--lab", "form"))  # a lab brings its own task
    assert "needs an API key" in lab
    assert not runs.exists()


# ---------------------------------------------------------------------------------------------------
# Point 10: `runs` at 80 columns
# ---------------------------------------------------------------------------------------------------
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # a colour


def in_terminal(args: list[str], columns: int, env: dict[str, str]) -> tuple[int, list[str], str]:
    """``python -m cua_tui.cli ARGS`` with its stdout on a pseudo-terminal of ``columns`` x 24."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "cua_tui.cli", *args],
        stdout=slave,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **env, "COLUMNS": str(columns)},
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, out.decode().replace("\r\n", "\n").splitlines(), err.decode()


def test_runs_fits_80_columns_without_a_wrapped_row(env: dict[str, str], tmp_path: Path) -> None:
    for _ in range(2):
        assert headless_run(env, tmp_path).exit_code == 0
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    code, lines, err = in_terminal(["runs"], 80, env)
    assert code == 0, err
    # on a terminal the status and the record are coloured: the width is what the eye sees
    lines = [ANSI.sub("", line) for line in lines]
    assert len(lines) == 3 and max(map(len, lines)) <= 80, lines
    assert re.split(r" {2,}", lines[0].strip()) == ["STATUS", "RECORD", "RUN", "TASK", "REASON"]
    # how it ended first, then the record, then the id, whole: what every command takes
    assert all(line.split()[:2] == ["passed", "intact"] for line in lines[1:]), lines
    assert sorted(line.split()[2] for line in lines[1:]) == runs
    assert "fill the verif" in lines[1]  # shortened, still saying something
    (note,) = err.splitlines()
    assert note.startswith("note: ") and "hidden to fit 80 columns" in note and len(note) <= 80, note
    code, wide, _ = in_terminal(["runs"], 200, env)
    wide = [ANSI.sub("", line) for line in wide]
    assert re.split(r" {2,}", wide[0].strip()) == list(HEADER) and max(map(len, wide)) <= 200
    assert " script:form.json " in wide[1] and "a folder" not in wide[1]  # the script by its file's name
    piped = cli(env, "runs")  # not a terminal: every column, nothing cut, no colour
    assert re.split(r" {2,}", piped.stdout.splitlines()[0].strip()) == list(HEADER) and piped.stderr == ""
    assert "\x1b" not in piped.stdout


def test_a_script_agent_is_named_by_its_file() -> None:
    entry = RunEntry(
        "20261201-000000-aaaaaa", "/r", agent="script:/very/long/checkout/path/to/form.json (scripted demo)"
    )
    lines, hidden = layout([entry])
    assert hidden == [] and " script:form.json " in lines[1] and "/very" not in lines[1]
    assert entry.as_json()["agent"] == "script:/very/long/checkout/path/to/form.json (scripted demo)"


# ---------------------------------------------------------------------------------------------------
# Point 9: a run's last lines name the next commands, which work as printed
# ---------------------------------------------------------------------------------------------------
def commands(stderr: str) -> tuple[list[str], dict[str, list[str]]]:
    """The last four lines, and each command in them split as a shell would, the program removed."""
    last = stderr.splitlines()[-4:]
    assert last[0].startswith("next"), stderr
    prog = shlex.split(program())
    found = {}
    for line in last[1:]:
        words = shlex.split(line.split(":", 1)[1])
        assert words[: len(prog)] == prog, line
        found[words[len(prog)]] = words[len(prog) :]
    return last, found


def test_a_headless_run_ends_with_the_next_commands_for_its_id(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = headless_run(env, tmp_path)
    assert result.exit_code == 0, result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    last, found = commands(result.stderr)
    assert result.stderr.splitlines()[-5] == f"run directory: {run}"
    assert last[1:] == [
        f"  step through it:   {program()} replay {run.name}",
        f"  export a report:   {program()} export {run.name} --html {run.name}.html",
        f"  check its log:     {program()} verify {run.name}",
    ]
    monkeypatch.chdir(tmp_path)  # where the export's report goes
    verified = cli(env, *found["verify"])
    assert verified.exit_code == 0 and verified.stdout.startswith("intact: "), verified.output
    exported = cli(env, *found["export"])
    assert exported.exit_code == 0, exported.stderr
    assert (tmp_path / f"{run.name}.html").read_text().startswith("<!DOCTYPE html>")
    assert found["replay"] == ["replay", run.name]


def test_a_run_elsewhere_is_named_by_its_quoted_path(env: dict[str, str], tmp_path: Path) -> None:
    elsewhere = tmp_path / "other runs"  # not the settings' runs directory, and a space to quote
    result = headless_run(env, tmp_path, "--runs-dir", str(elsewhere))
    (run,) = elsewhere.iterdir()
    last, found = commands(result.stderr)
    assert shlex.quote(str(run)) in last[3] and "'" in last[3]
    assert found["verify"] == ["verify", str(run)]
    verified = cli(env, *found["verify"])
    assert verified.exit_code == 0, verified.output


def test_the_program_is_cua_tui_once_it_is_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    assert program() == f"{shlex.quote(sys.executable)} -m cua_tui.cli"  # nothing on PATH: what surely runs
    entry = bin_dir / "cua-tui"  # what set-up's link puts on PATH (here the entry point as a script)
    entry.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m cua_tui.cli "$@"\n')
    entry.chmod(0o755)
    assert program() == "cua-tui"


def test_a_fleet_summary_ends_with_the_next_commands(env: dict[str, str], tmp_path: Path) -> None:
    script = script_file(tmp_path)
    tasks = tmp_path / "suite.toml"
    tasks.write_text(
        "".join(f'[[tasks]]\nname = "{n}"\ntask = "fill the form"\nagent = "script:{script}"\n\n' for n in ("a", "b"))
    )
    result = cli(env, "fleet", "--tasks", tasks, "--backend", "sim", "--headless", "--on-confirm", "reject")
    assert result.exit_code == 1, result.stderr  # rejected typing: neither run passes
    lines = result.stderr.splitlines()
    fleet_id = next(line.split()[1].rstrip(":") for line in lines if line.startswith("fleet fleet-"))
    first = json.loads((tmp_path / "runs" / "fleet.json").read_text())["fleets"][fleet_id]["runs"][0]
    run_id = first["run_id"]
    assert lines[-5] == f"list the fleet's runs: {program()} runs --fleet {fleet_id}"
    assert lines[-4] == "next, with the run of task a (failed):"
    _, found = commands(result.stderr)
    assert found["verify"] == ["verify", run_id]
    verified = cli(env, *found["verify"])
    assert verified.exit_code == 0, verified.output


# ---------------------------------------------------------------------------------------------------
# Issue 23, point 4: usage errors share one root, said in one form wherever they are raised
# ---------------------------------------------------------------------------------------------------
CLICKS_OWN = [
    (["run", "--bogus"], "No such option '--bogus'; see `main run --help`"),
    (["run", "--max-steps", "0"], "Invalid value for '--max-steps': 0 is not in the range"),
    (["run", "--backend", "nope"], "Invalid value for '--backend': 'nope' is not one of 'local'"),
    (["fleet"], "Missing option '--tasks'; see `main fleet --help`"),
    (["verify"], "Missing argument 'RUN'; see `main verify --help`"),
    (["runs", "--status", "nope"], "Invalid value for '--status'"),
    (["nosuchcmd"], "No such command 'nosuchcmd'; see `main --help`"),
    (["--bogus"], "No such option '--bogus'; see `main --help`"),
]


@pytest.mark.parametrize(("args", "said"), CLICKS_OWN, ids=[" ".join(a) for a, _ in CLICKS_OWN])
def test_clicks_own_usage_errors_take_the_one_form(env: dict[str, str], args: list[str], said: str) -> None:
    line = one_error(cli(env, *args))
    assert line.startswith("Error: " + said.split(";")[0]), line
    assert said in line and line.endswith(" --help`"), line
    assert "Usage:" not in line and "Try '" not in line


def test_every_layers_usage_error_takes_the_one_form(env: dict[str, str], tmp_path: Path) -> None:
    """The command line, the builder, the factory, the settings, the policy and the tasks file each raise
    their own UsageError; none is caught on the way up, and each ends the same way: exit 2, one line."""
    policy = tmp_path / "p.toml"
    policy.write_text('version = 1\n\n[limits]\nmax_turns = "ten"\n')
    tasks = tmp_path / "t.toml"
    tasks.write_text('[[tasks]]\nname = "a"\ntask = "x"\nbogus = 1\n')
    broken_settings = tmp_path / "settings.toml"
    broken_settings.write_text("runs_dir = 5\n")
    script = f"script:{script_file(tmp_path)}"
    cases: dict[str, tuple[list[str | Path], str]] = {
        # the command line's own checks (fail)
        "lab and url": (["run", "--lab", "form", "--url", "http://x"], "Error: --lab and --url: choose one"),
        "no output": (["export", "x"], "Error: nothing to export; give --html"),
        "since": (["runs", "--since", "yesterday"], "Error: --since 'yesterday': expected an age"),
        "ask": (["fleet", "--tasks", tasks, "--on-confirm", "ask"], "Error: --on-confirm ask: one terminal"),
        # core.policy's PolicyError, core.tasks' TasksError, config's ConfigError
        "policy": (["policy", "--check", policy], f"Error: policy file {policy}"),
        "tasks": (["fleet", "--tasks", tasks, "--headless"], f"Error: tasks file {tasks}"),
        "settings": (["locate"], f"Error: settings file {broken_settings}"),
        # build's BuildError and factory's UnavailableError, as a run meets them
        "screen": (["run", "--backend", "sim", "--agent", script, "--screen", "huge"], "is not WIDTHxHEIGHT"),
        "model": (
            ["run", "--agent", script, "--model", "m"],
            "Error: --model: only for the openai, anthropic and openai-compatible",
        ),
        "key": (["sandboxes"], "Error: the cwsandbox backend needs an API key"),
    }
    for name, (args, said) in cases.items():
        where = {**env, "CUA_TUI_CONFIG": str(broken_settings)} if name == "settings" else env
        line = one_error(cli(where, *args))
        assert said in line, (name, line)
    assert not (tmp_path / "runs").exists()


def test_the_errors_of_every_layer_share_one_root() -> None:
    from cua_tui.build import BuildError
    from cua_tui.config import ConfigError
    from cua_tui.core.errors import CommandError, UsageError
    from cua_tui.core.policy import PolicyError
    from cua_tui.core.tasks import TasksError
    from cua_tui.factory import UnavailableError

    for kind in (BuildError, ConfigError, PolicyError, TasksError, UnavailableError):
        # still ValueErrors for the code that catches them as such (the builder, the fleet runner)
        assert issubclass(kind, UsageError) and issubclass(kind, ValueError), kind
        assert kind("why").exit_code == 2 and str(kind("why")) == "why"
    assert UsageError.exit_code == 2 and CommandError.exit_code == 1 and issubclass(UsageError, CommandError)
    assert str(UsageError("no such thing", path="/a b", hint="look elsewhere")) == "/a b: no such thing; look elsewhere"


def test_a_service_that_fails_is_exit_1_in_the_same_form(env: dict[str, str]) -> None:
    """Not a usage error: the command could not do its work. Same line, exit 1, the key never shown."""
    service = {**env, "CWSANDBOX_API_KEY": "sk-secret-123", "CWSANDBOX_BASE_URL": "http://127.0.0.1:9"}
    line = one_error(cli(service, "sandboxes"), code=1)
    assert line.startswith("Error: cwsandbox: ") and "sk-secret-123" not in line
