"""`cua-tui policy --check`: what a file says is shown literally, its errors name the line, and what it
accepts is what a run accepts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from allowlist_cases import BAD, GOOD
from click.testing import CliRunner

from cua_tui.cli import main
from cua_tui.core.allowlist import AllowList

# ESC-based sequences (OSC 52 clipboard write, OSC title, CSI clear screen and colour), BEL, C1 controls
# (8-bit CSI and OSC, NEL) and bidi overrides: as TOML escapes, since raw control characters are not TOML.
HOSTILE = (
    "\\u001b]52;c;cHduZWQ=\\u0007\\u001b]0;title\\u001b\\\\\\u001b[2J\\u001b[31m"
    "\\u009b31m\\u009d0;x\\u009c\\u0085\\u202e"
)
CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0), 0x202E)]


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_check_shows_every_field_from_the_file_literally(tmp_path: Path) -> None:
    policy = write(
        tmp_path,
        f'version = 1\nname = "{HOSTILE}"\ndescription = "{HOSTILE}"\n'
        f'[[regions]]\nname = "{HOSTILE}"\nreason = "{HOSTILE}"\nx = 0\ny = 0\nwidth = 5\nheight = 5\n'
        '[network]\nallow_domains = ["example.com"]\n',
        name="p\x1b]52;c;eA==\x07.toml",
    )
    code, out = invoke("policy", "--check", str(policy))
    assert code == 0, out
    lines = out.splitlines()
    assert not [line for line in lines if any(c in line for c in CONTROLS)]
    shown = "␛]52;c;cHduZWQ=␇␛]0;title␛\\␛[2J␛[31m\\x9b31m\\x9d0;x\\x9c\\x85\\u202e"
    assert lines[0].startswith(f"policy {shown} (") and "p␛]52;c;eA==␇.toml" in lines[0]
    assert f"description: {shown}" in lines
    assert any(line.startswith(f"region {shown}: confirm at 0,0 5x5") for line in lines)
    assert f"region {shown} reason: {shown}" in lines
    assert "allowed domains: example.com" in lines


def test_check_errors_show_file_text_literally(tmp_path: Path) -> None:
    policy = write(
        tmp_path,
        f'[[regions]]\nname = "{HOSTILE}"\nx = 0\ny = 0\nwidth = 5\nheight = 5\nverdict = "maybe"\n',
        name="bad\x1b[2J.toml",
    )
    code, out = invoke("policy", "--check", str(policy))
    assert code == 2
    assert "line 7: regions.0.verdict" in out
    assert not any(c in out.replace("\n", "") for c in CONTROLS)


@pytest.mark.parametrize("entry", BAD, ids=repr)
def test_check_refuses_what_a_run_would_refuse_with_its_line(tmp_path: Path, entry: str) -> None:
    entries = f"[\n  'example.com',\n  {json.dumps(entry)},\n]"
    policy = write(tmp_path, f"version = 1\n[network]\nallow_domains = {entries}\n")
    code, out = invoke("policy", "--check", str(policy))
    assert code == 2, out
    assert "line 5: network.allow_domains: " in out
    with pytest.raises(ValueError):
        AllowList.parse(["example.com", entry])  # the proxy refuses it too


@pytest.mark.parametrize(("entry", "normalized"), GOOD.items(), ids=repr)
def test_check_accepts_what_a_run_accepts(tmp_path: Path, entry: str, normalized: str) -> None:
    policy = write(tmp_path, f"[network]\nallow_domains = [{json.dumps(entry)}]\n")
    code, out = invoke("policy", "--check", str(policy))
    assert code == 0, out
    assert f"allowed domains: {normalized}" in out
    assert AllowList.parse([normalized]).entries == (normalized,)


@pytest.mark.parametrize("n", [4_000, 30_000])
def test_check_answers_at_once_on_a_long_line(tmp_path: Path, n: int) -> None:
    """The old line-finding pattern took 45 s on 4,000 characters and hours on 30,000."""
    policy = write(tmp_path, 'description = """\n[' + " " * n + ']x\n"""\n[limits]\nmax_turns = 0\n')
    started = time.perf_counter()
    code, out = invoke("policy", "--check", str(policy))
    assert time.perf_counter() - started < 5.0
    assert code == 2 and "line 5: limits.max_turns: max_turns must be at least 1" in out
