"""`cua-tui verify RUN_DIR [--key PATH]` (0 intact, 1 tampered, 2 unusable) and `cua-tui run --audit-key`."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from runlogs import UNSIGNED, action_records, interrupted_turn, write_run

from cua_tui.cli import main
from cua_tui.core.audit import GENESIS, AuditKey

BIN = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "cua-tui"
SCRIPT = {
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
MIDDLE = 10


def invoke(args: Sequence[str | Path], home: Path) -> Result:
    """Run the CLI in-process with settings isolated from the user's (no config file, runs under home)."""
    env = {"CUA_TUI_CONFIG": str(home / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(home / "default-runs")}
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def only_run(runs: Path) -> Path:
    found = [p for p in runs.iterdir() if p.is_dir()]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cli")
    (home / "script.json").write_text(json.dumps(SCRIPT))
    (home / "hmac.key").write_bytes(b"a secret kept outside the runs directory\n")
    private = ed25519.Ed25519PrivateKey.generate()
    (home / "ed.pem").write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (home / "ed.pub.pem").write_bytes(
        private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    for secret in ("hmac.key", "ed.pem"):  # signing keys must be private to their owner
        (home / secret).chmod(0o600)
    return home


def headless_run(home: Path, runs: Path, *extra: str | Path) -> tuple[Result, Path]:
    result = invoke(
        [
            "run",
            "--headless",
            "--backend",
            "sim",
            "--agent",
            f"script:{home / 'script.json'}",
            "--runs-dir",
            runs,
            "--on-confirm",
            "approve",
            *extra,
        ],
        home,
    )
    return result, runs


@pytest.fixture(scope="module")
def signed_run(home: Path) -> Path:
    """A real headless run whose seal is signed with the HMAC key."""
    result, runs = headless_run(home, home / "runs-hmac", "--audit-key", home / "hmac.key")
    assert result.exit_code == 0, result.output
    return only_run(runs)


@pytest.fixture
def run_copy(signed_run: Path, tmp_path: Path) -> Path:
    target = tmp_path / signed_run.name
    shutil.copytree(signed_run, target)
    return target


# ---------------------------------------------------------------------------------------------------
# run --audit-key
# ---------------------------------------------------------------------------------------------------
def test_run_with_audit_key_signs_the_seal(signed_run: Path, home: Path) -> None:
    key = AuditKey.load(home / "hmac.key")
    result = json.loads((signed_run / "result.json").read_text())
    assert result["status"] == "passed"
    seal = result["seal"]
    lines = (signed_run / "audit.jsonl").read_bytes().splitlines()
    assert seal["events"] == len(lines) == result["counts"]["events"]
    assert seal["signature"]["algorithm"] == "hmac-sha256"
    assert seal["signature"]["key_id"] == key.key_id
    assert len(seal["signature"]["value"]) == 64
    assert json.loads((signed_run / "run.json").read_text())["audit_key_id"] == key.key_id
    # the key itself is nowhere in the run directory
    secret = (home / "hmac.key").read_bytes().strip()
    for path in signed_run.rglob("*"):
        if path.is_file():
            assert secret not in path.read_bytes()


def test_verify_with_key_says_signature_verified(signed_run: Path, home: Path) -> None:
    result = invoke(["verify", signed_run, "--key", home / "hmac.key"], home)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("intact: ")
    assert "signature verified" in result.stdout
    assert result.stderr == ""


def test_verify_without_key_notes_signature_not_checked(signed_run: Path, home: Path) -> None:
    result = invoke(["verify", signed_run], home)
    assert result.exit_code == 0, result.output
    assert "intact" in result.stdout
    assert "signature not checked" in result.stdout
    assert "note: the seal is signed; pass --key" in result.stdout


def test_ed25519_run_signed_with_private_verified_with_public_key(home: Path) -> None:
    result, runs = headless_run(home, home / "runs-ed", "--audit-key", home / "ed.pem")
    assert result.exit_code == 0, result.output
    run_dir = only_run(runs)
    seal = json.loads((run_dir / "result.json").read_text())["seal"]
    assert seal["signature"]["algorithm"] == "ed25519"
    verified = invoke(["verify", run_dir, "--key", home / "ed.pub.pem"], home)
    assert verified.exit_code == 0, verified.output
    assert "signature verified" in verified.stdout
    wrong = invoke(["verify", run_dir, "--key", home / "hmac.key"], home)
    assert wrong.exit_code == 1
    assert "signature" in wrong.stderr


def test_run_rejects_a_public_key(home: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    result, _ = headless_run(home, runs, "--audit-key", home / "ed.pub.pem")
    assert result.exit_code == 2, result.output
    assert "public key cannot sign" in result.stderr
    assert not runs.exists() or not any(runs.iterdir())  # refused before any run directory was made


@pytest.mark.parametrize("bad", ["missing", "directory", "short"])
def test_run_rejects_an_unusable_audit_key(home: Path, tmp_path: Path, bad: str) -> None:
    key = tmp_path / "key"
    if bad == "directory":
        key.mkdir()
    elif bad == "short":
        key.write_bytes(b"short")
    result, runs = headless_run(home, tmp_path / "runs", "--audit-key", key)
    assert result.exit_code == 2, result.output
    assert "audit key" in result.stderr
    assert not runs.exists() or not any(runs.iterdir())


# ---------------------------------------------------------------------------------------------------
# verify: exit codes and messages
# ---------------------------------------------------------------------------------------------------
def test_verify_tampered_middle_line_exits_1(run_copy: Path, home: Path) -> None:
    lines = (run_copy / "audit.jsonl").read_bytes().splitlines()
    record = json.loads(lines[MIDDLE - 1])
    record["ts"] += 1
    lines[MIDDLE - 1] = json.dumps(record, separators=(",", ":")).encode()
    (run_copy / "audit.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    result = invoke(["verify", run_copy], home)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"TAMPERED: line {MIDDLE}: edited")
    assert result.stdout == ""


def test_verify_truncated_exits_1(run_copy: Path, home: Path) -> None:
    data = (run_copy / "audit.jsonl").read_bytes().splitlines(keepends=True)
    (run_copy / "audit.jsonl").write_bytes(b"".join(data[:-2]))
    result = invoke(["verify", run_copy, "--key", home / "hmac.key"], home)
    assert result.exit_code == 1
    assert "TAMPERED: truncated" in result.stderr


def test_verify_recomputed_chain_needs_the_key(run_copy: Path, home: Path) -> None:
    lines = (run_copy / "audit.jsonl").read_bytes().splitlines()
    records = [json.loads(line) for line in lines]
    del records[MIDDLE - 1]
    prev, out = GENESIS, []
    for seq, rec in enumerate(records):
        rec["seq"], rec["prev"] = seq, prev
        line = json.dumps(rec, separators=(",", ":")).encode()
        out.append(line)
        prev = hashlib.sha256(line).hexdigest()
    (run_copy / "audit.jsonl").write_bytes(b"".join(line + b"\n" for line in out))
    result_json = json.loads((run_copy / "result.json").read_text())
    result_json["seal"].update(events=len(out), head=prev)
    (run_copy / "result.json").write_text(json.dumps(result_json))
    assert invoke(["verify", run_copy], home).exit_code == 0
    keyed = invoke(["verify", run_copy, "--key", home / "hmac.key"], home)
    assert keyed.exit_code == 1
    assert "signature does not match" in keyed.stderr


def test_verify_wrong_key_exits_1(signed_run: Path, home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.key"
    other.write_bytes(b"not the key this run was signed with")
    result = invoke(["verify", signed_run, "--key", other], home)
    assert result.exit_code == 1
    assert "TAMPERED" in result.stderr and "signature" in result.stderr


def test_verify_unsealed_run_exits_0(run_copy: Path, home: Path) -> None:
    (run_copy / "result.json").unlink()
    data = (run_copy / "audit.jsonl").read_bytes()
    (run_copy / "audit.jsonl").write_bytes(data[:-15])
    result = invoke(["verify", run_copy], home)
    assert result.exit_code == 0, result.output
    assert "UNSEALED" in result.stdout
    assert "note: line" in result.stdout and "incomplete last line" in result.stdout


def test_verify_nonexistent_path_exits_2(home: Path, tmp_path: Path) -> None:
    result = invoke(["verify", tmp_path / "nope"], home)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {tmp_path / 'nope'}: no such run directory; ")  # as replay, export


def test_verify_directory_without_audit_log_exits_2(home: Path, tmp_path: Path) -> None:
    result = invoke(["verify", tmp_path], home)
    assert result.exit_code == 2
    assert "no audit.jsonl" in result.stderr


def test_verify_file_instead_of_directory_exits_2(signed_run: Path, home: Path) -> None:
    result = invoke(["verify", signed_run / "audit.jsonl"], home)
    assert result.exit_code == 2
    assert "not a run directory" in result.stderr


@pytest.mark.parametrize("bad", ["missing", "directory", "short", "bad-pem"])
def test_verify_with_unusable_key_exits_2(signed_run: Path, home: Path, tmp_path: Path, bad: str) -> None:
    key = tmp_path / "key"
    if bad == "directory":
        key.mkdir()
    elif bad == "short":
        key.write_bytes(b"short")
    elif bad == "bad-pem":
        key.write_bytes(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    result = invoke(["verify", signed_run, "--key", key], home)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: audit key")


def test_verify_without_arguments_is_a_usage_error(home: Path) -> None:
    assert invoke(["verify"], home).exit_code == 2


def test_installed_entry_point_exit_codes(run_copy: Path, home: Path, tmp_path: Path) -> None:
    assert BIN.exists()
    ok = subprocess.run([BIN, "verify", run_copy, "--key", home / "hmac.key"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "signature verified" in ok.stdout
    (run_copy / "screens" / next(p.name for p in (run_copy / "screens").glob("*.png"))).unlink()
    bad = subprocess.run([BIN, "verify", run_copy], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "TAMPERED: line" in bad.stderr and "missing" in bad.stderr
    unusable = subprocess.run([BIN, "verify", tmp_path / "nope"], capture_output=True, text=True)
    assert unusable.returncode == 2


# ---------------------------------------------------------------------------------------------------
# signed runs cut short, interrupted runs (issue 8, points 3 and 10)
# ---------------------------------------------------------------------------------------------------
def test_verify_signed_run_cut_short_fails_only_with_the_key(home: Path, tmp_path: Path) -> None:
    key = AuditKey.load(home / "hmac.key")
    run = write_run(tmp_path / "20261201-000000-c0ffee", key, action_records(50))
    lines = (run / "audit.jsonl").read_bytes().splitlines(keepends=True)
    (run / "audit.jsonl").write_bytes(b"".join(lines[:400]))
    (run / "result.json").unlink()
    plain = invoke(["verify", run], home)
    assert plain.exit_code == 0, plain.output
    assert plain.stdout.startswith("intact prefix, UNSEALED: 400 events")
    assert "note: signed run without a seal: truncation cannot be ruled out; check with --key" in plain.stdout
    keyed = invoke(["verify", run, "--key", home / "hmac.key"], home)
    assert keyed.exit_code == 1
    assert keyed.stdout == ""
    assert keyed.stderr.startswith("NOT VOUCHED FOR: signed run without a seal")
    assert "signed up to checkpoint at event 256 of 400" in keyed.stderr.splitlines()[0]


def test_verify_interrupted_run_lists_actions_without_outcome(home: Path, tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", None, interrupted_turn(), signed=UNSIGNED, seal=False)
    result = invoke(["verify", run], home)
    assert result.exit_code == 0, result.output
    assert "note: turn 2, action 2: outcome unknown (interrupted)" in result.stdout
    assert "note: turn 2, action 3: not executed (interrupted)" in result.stdout


def test_verify_output_shows_hostile_text_literally(home: Path, tmp_path: Path) -> None:
    """A run directory's name (completed by the shell from a hostile runs folder) carrying an OSC 52
    clipboard write reaches the message; it is printed as visible symbols, never as an escape."""
    run = tmp_path / "20261201-000000-abcdef\x1b]52;c;SGk=\x07"
    run.mkdir()
    result = invoke(["verify", run], home)
    assert result.exit_code == 2
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "␛]52;c;SGk=␇: no audit.jsonl" in result.stderr


# ---------------------------------------------------------------------------------------------------
# verify RUN-ID (issue 10): a run id as `runs` lists it, or its unique beginning, in the runs directory
# ---------------------------------------------------------------------------------------------------
def test_verify_by_run_id_and_unique_prefix(home: Path, tmp_path: Path) -> None:
    runs = home / "default-runs"
    for name in ("20261201-100000-aaaaaa", "20261201-100000-bbbbbb", "20261202-090000-cccccc"):
        write_run(runs / name, None, action_records(1), signed=UNSIGNED)
    for arg in ("20261201-100000-aaaaaa", "20261202", "20261201-100000-b"):
        result = invoke(["verify", arg], home)
        assert result.exit_code == 0 and result.stdout.startswith("intact: "), (arg, result.output)
    with_key = invoke(["verify", "20261202", "--key", home / "hmac.key"], home)
    assert with_key.exit_code == 1 and "not signed" in with_key.stderr  # the key applies to the run found


@pytest.mark.parametrize(
    ("arg", "says"),
    [
        ("20261203-000000-dddddd", "no run 20261203-000000-dddddd in "),
        ("20261201-1000", "2 runs in "),
        ("20991231", "no run id in "),
        ("not-a-run", "no such run directory"),
        ("\x1b]52;c;SGk=\x07", "␛]52;c;SGk=␇"),
    ],
)
def test_verify_an_unknown_run_id_is_one_line_exit_2(home: Path, arg: str, says: str) -> None:
    runs = home / "default-runs"
    for name in ("20261201-100000-aaaaaa", "20261201-100000-bbbbbb"):
        if not (runs / name).exists():
            write_run(runs / name, None, action_records(1), signed=UNSIGNED)
    result = invoke(["verify", arg], home)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: ") and says in line and "\x1b" not in line
