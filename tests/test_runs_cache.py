"""`cua-tui runs` remembers the verdicts of runs whose files have not changed (cli/verified), and only those.

Runs are real (the one builder on the sim desktop); every edit below is one an attacker with write access to
the runs directory could make, including putting a file's modification time back: the change time, which
no user sets, still gives it away. The hostile corpus lists the same with and without what is remembered.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from export_runs import sim_run
from hostile_runs import CASES, DAMAGED, Case, pristine_run

from cua_tui import __version__
from cua_tui.cli import verified
from cua_tui.cli.runs import RunEntry, read_runs
from cua_tui.cli.verified import Cache
from cua_tui.core import runlist
from cua_tui.core.safeio import RunFolder

# the user's cache key (cli/verified.cache_key makes and checks the real one: tested below)
KEY = bytes(range(32))


@pytest.fixture(autouse=True)
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # runs made a moment ago count as settled (the rule for coarse clocks has its own test)
    monkeypatch.setattr(runlist, "SETTLED_S", 0.0)


def _runs(tmp_path: Path, count: int = 3) -> Path:
    source = sim_run(tmp_path / "source")
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(count):
        shutil.copytree(source, folder / f"20261201-00000{i}-00000{i}")
    return folder


def _list(folder: Path, cache: Cache | None) -> dict[str, RunEntry]:
    with RunFolder.open(folder) as top:
        entries = read_runs(top, check=True, cache=cache)
    if cache is not None:
        cache.save()
    return {entry.id: entry for entry in entries}


def _cells(entries: dict[str, RunEntry]) -> dict[str, tuple[object, ...]]:
    return {
        k: (e.verified, e.verify_summary, e.unknown_outcomes, e.decisions, e.steps, e.status, e.reason)
        for k, e in entries.items()
    }


def _edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Change bytes of a file without changing its size, inode or modification time."""
    assert len(old) == len(new)
    info = path.stat()
    data = path.read_bytes()
    assert old in data
    with path.open("r+b") as fh:
        fh.write(data.replace(old, new, 1))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_mtime_ns == info.st_mtime_ns and path.stat().st_size == info.st_size


def test_unchanged_runs_are_remembered_and_listed_the_same(tmp_path: Path) -> None:
    folder = _runs(tmp_path)
    store = tmp_path / "cache" / verified.NAME
    first = Cache(store, KEY)
    listed = _list(folder, first)
    assert first.hits == 0 and {e.verified for e in listed.values()} == {"intact"}
    again = Cache(store, KEY)
    assert _cells(_list(folder, again)) == _cells(listed) == _cells(_list(folder, None))
    assert again.hits == 3 and again.misses == 0
    assert store.stat().st_mode & 0o777 == 0o600
    assert not any(p.name == verified.NAME for p in folder.rglob("*"))  # never in a run directory


@pytest.mark.parametrize(
    ("target", "old", "new", "says"),
    [
        ("audit.jsonl", b'"turn":1', b'"turn":7', "TAMPERED"),  # a record edited in place
        ("result.json", b'"passed"', b'"failed"', "TAMPERED"),  # the seal's file (counts no longer match)
    ],
)
def test_a_file_edited_in_place_with_its_time_put_back_is_verified_again(
    tmp_path: Path, target: str, old: bytes, new: bytes, says: str
) -> None:
    folder = _runs(tmp_path, 2)
    store = tmp_path / "cache" / verified.NAME
    _list(folder, Cache(store, KEY))
    victim = folder / "20261201-000001-000001"
    _edit_in_place(victim / target, old, new)
    after = Cache(store, KEY)
    listed = _list(folder, after)
    assert after.hits == 1 and after.misses == 1
    honest = _list(folder, None)
    assert _cells(listed) == _cells(honest)
    if target == "audit.jsonl":
        assert listed[victim.name].verified == "tampered" and says in (listed[victim.name].verify_summary or "")


def test_a_screenshot_altered_in_place_is_caught(tmp_path: Path) -> None:
    folder = _runs(tmp_path, 1)
    store = tmp_path / "cache" / verified.NAME
    _list(folder, Cache(store, KEY))
    run = folder / "20261201-000000-000000"
    screen = next((run / "screens").iterdir())
    data = screen.read_bytes()
    _edit_in_place(screen, data[-20:], bytes(b ^ 1 for b in data[-20:]))
    listed = _list(folder, Cache(store, KEY))
    assert listed[run.name].verified == "tampered" and "altered" in (listed[run.name].verify_summary or "")


def test_a_run_swapped_for_another_directory_is_verified_again(tmp_path: Path) -> None:
    folder = _runs(tmp_path, 2)
    store = tmp_path / "cache" / verified.NAME
    _list(folder, Cache(store, KEY))
    a, b = folder / "20261201-000000-000000", folder / "20261201-000001-000001"
    (b / "audit.jsonl").write_bytes((b / "audit.jsonl").read_bytes()[:-200])  # b: cut short
    a.rename(tmp_path / "a")
    b.rename(a)  # the damaged run under the intact one's name
    after = Cache(store, KEY)
    listed = _list(folder, after)
    assert after.hits == 0
    assert listed[a.name].verified == "tampered"


def test_runs_changed_a_moment_ago_are_not_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runlist, "SETTLED_S", 3600.0)
    folder = _runs(tmp_path, 2)
    store = tmp_path / "cache" / verified.NAME
    _list(folder, Cache(store, KEY))
    again = Cache(store, KEY)
    _list(folder, again)
    assert again.hits == 0 and not store.exists()


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b'{"format": 1, "version": "0.0.0", "runs": {}}',
        b'{"format": 1, "version": "%s", "runs": []}',
        b'{"format": 1, "version": "%s", "runs": {"X": {"identity": 5, "verified": "intact"}}}',
        b"[" * 100000,
    ],
    ids=["garbage", "another-version", "runs-a-list", "entry-of-wrong-types", "deep-nesting"],
)
def test_a_hostile_cache_file_is_ignored(tmp_path: Path, content: bytes) -> None:
    from cua_tui import __version__

    folder = _runs(tmp_path, 2)
    store = tmp_path / "cache" / verified.NAME
    store.parent.mkdir()
    store.write_bytes(content.replace(b"%s", __version__.encode()))
    assert _cells(_list(folder, Cache(store, KEY))) == _cells(_list(folder, None))


def test_a_run_with_more_files_than_any_run_writes_is_verified_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _runs(tmp_path, 2)
    crowded = folder / "20261201-000001-000001" / "screens"
    monkeypatch.setattr(runlist, "MAX_LISTED", len(list(crowded.iterdir())) + 2)
    for n in range(3):
        (crowded / f"extra-{n}").write_bytes(b"")  # one entry over the cap
    store = tmp_path / "cache" / verified.NAME
    _list(folder, Cache(store, KEY))
    again = Cache(store, KEY)
    assert _cells(_list(folder, again)) == _cells(_list(folder, None))
    assert again.hits == 1  # the other one; the crowded one is verified each time, never looked up
    assert str(crowded.parent) not in store.read_text() and str(folder / "20261201-000000-000000") in store.read_text()


def test_a_forged_entry_for_a_run_claims_nothing(tmp_path: Path) -> None:
    """Someone who can write the cache (the user) could claim anything; a wrong shape or a verdict for
    another identity is not taken."""
    folder = _runs(tmp_path, 1)
    store = tmp_path / "cache" / verified.NAME
    cache = Cache(store, KEY)
    run = str(folder / "20261201-000000-000000")
    cache.put(run, "0" * 64, verified.Verdict("intact", "forged"))
    cache.save()
    listed = _list(folder, Cache(store, KEY))
    assert listed["20261201-000000-000000"].verify_summary != "forged"


def _forge(store: Path, run: Path, verdict: dict[str, object], mac: str | None) -> None:
    """A well-formed entry for ``run`` as it is now (its identity right), written straight into the cache
    file by someone who can write the cache folder but does not hold the user's key."""
    with RunFolder.open(run) as folder:
        known = verified.fingerprint(folder.fd)
    assert known is not None
    entry: dict[str, object] = {"identity": known[0], **verdict}
    if mac is not None:
        entry["mac"] = mac
    data = json.loads(store.read_text())
    data["runs"][str(run)] = entry
    store.write_text(json.dumps(data))


@pytest.mark.parametrize("mac", [None, "0" * 64, "another key"], ids=["no-tag", "a-wrong-tag", "another-key"])
def test_a_forged_entry_in_a_shared_cache_folder_cannot_make_a_tampered_run_intact(
    tmp_path: Path, mac: str | None
) -> None:
    """The cache folder may be shared between users (CUA_TUI_CACHE_DIR): an entry that the old format took
    (the right identity, a verdict of the right shape) is not taken without the user's key's tag."""
    folder = _runs(tmp_path, 2)
    store = tmp_path / "cache" / verified.NAME
    _list(folder, Cache(store, KEY))
    victim = folder / "20261201-000001-000001"
    _edit_in_place(victim / "audit.jsonl", b'"verdict":"block"', b'"verdict":"allow"')
    claim = {"verified": "intact", "summary": "intact: forged", "unknown_outcomes": 0, "decisions": 1, "proposals": 9}
    if mac == "another key":
        with RunFolder.open(victim) as opened:
            known = verified.fingerprint(opened.fd)
        assert known is not None
        mac = verified._tag(bytes(32), str(victim), known[0], claim)
    _forge(store, victim, claim, mac)
    after = Cache(store, KEY)
    listed = _list(folder, after)
    assert listed[victim.name].verified == "tampered" and "forged" not in (listed[victim.name].verify_summary or "")
    assert after.hits == 1 and after.misses == 1  # the other run, unchanged, is still remembered
    # the same entry with the tag the user's key gives is taken: the tag is what decides
    _forge(
        store,
        victim,
        claim,
        verified._tag(KEY, str(victim), json.loads(store.read_text())["runs"][str(victim)]["identity"], claim),
    )
    assert _list(folder, Cache(store, KEY))[victim.name].verify_summary == "intact: forged"


def test_a_verdict_remembered_by_format_3_is_not_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Format 3 did not remember the record's end: its verdict, taken, would let result.json's status stand on
    an intact record. The run is verified again, and its verdict remembered with the record's end."""
    folder = _runs(tmp_path, 1)
    run = folder / "20261201-000000-000000"
    assert json.loads((run / "result.json").read_text())["status"] == "passed"
    edited = json.loads((run / "result.json").read_text()) | {"status": "failed"}
    (run / "result.json").write_text(json.dumps(edited))
    honest = _list(folder, None)[run.name]
    said = "result.json says failed; the record says passed"
    assert (honest.status, honest.verified, honest.reason) == ("passed", "intact", said)
    with RunFolder.open(run) as opened:
        known = verified.fingerprint(opened.fd)
    assert known is not None
    # what format 3 wrote for the run as it is now: no "ended", tagged under format 3 with the user's key
    old = {"verified": "intact", "summary": honest.verify_summary, "unknown_outcomes": 0}
    old |= {"decisions": honest.decisions, "proposals": honest.steps}
    current = verified.FORMAT
    store = tmp_path / "cache" / verified.NAME
    store.parent.mkdir()

    def write(form: int) -> None:
        monkeypatch.setattr(verified, "FORMAT", form)
        entry = {"identity": known[0], **old, "mac": verified._tag(KEY, str(run), known[0], old)}
        store.write_text(json.dumps({"format": form, "version": __version__, "runs": {str(run): entry}}))
        monkeypatch.setattr(verified, "FORMAT", current)

    write(3)
    cache = Cache(store, KEY)
    listed = _list(folder, cache)[run.name]
    assert cache.hits == 0 and cache.misses == 1
    assert (listed.status, listed.reason) == ("passed", said)
    again = Cache(store, KEY)
    assert _cells(_list(folder, again)) == _cells({run.name: honest}) and again.hits == 1  # remembered, whole
    # the same entry under the current format is taken (its tag and shape are right): only the format keeps
    # the old one out, and taken it would leave result.json's status standing
    write(current)
    taken = Cache(store, KEY)
    assert _list(folder, taken)[run.name].status == "failed" and taken.hits == 1


def test_without_a_key_nothing_is_remembered_or_written(tmp_path: Path) -> None:
    folder = _runs(tmp_path, 2)
    store = tmp_path / "cache" / verified.NAME
    _list(folder, Cache(store, KEY))
    keyless = Cache(store, None)
    assert _cells(_list(folder, keyless)) == _cells(_list(folder, None))
    assert keyless.hits == 0 and keyless.misses == 2


def test_the_key_is_made_once_private_to_the_user_and_never_in_the_cache_folder(tmp_path: Path) -> None:
    config, cache = tmp_path / "config", tmp_path / "cache"
    key = verified.cache_key(config, cache)
    made = config / verified.KEY_NAME
    assert len(key) == 32 and made.stat().st_mode & 0o777 == 0o600 and made.stat().st_uid == os.geteuid()
    assert verified.cache_key(config, cache) == key  # the same key the next time
    assert sorted(p.name for p in config.iterdir()) == [verified.KEY_NAME]  # no temporary file left
    with pytest.raises(verified.KeyRefused, match="inside the cache folder"):
        verified.cache_key(cache / "config", cache)


@pytest.mark.parametrize("damage", ["mode-0644", "a-link", "short", "a-directory", "a-fifo"])
def test_a_key_file_that_is_not_the_users_private_file_is_refused(tmp_path: Path, damage: str) -> None:
    config, cache = tmp_path / "config", tmp_path / "cache"
    config.mkdir()
    made = config / verified.KEY_NAME
    if damage == "mode-0644":
        made.write_bytes(bytes(32))
        made.chmod(0o644)  # readable by others: a key they could use to forge
    elif damage == "a-link":
        (tmp_path / "elsewhere").write_bytes(bytes(32))
        (tmp_path / "elsewhere").chmod(0o600)
        made.symlink_to(tmp_path / "elsewhere")
    elif damage == "short":
        made.write_bytes(bytes(31))
        made.chmod(0o600)
    elif damage == "a-directory":
        made.mkdir()
    else:
        os.mkfifo(made, 0o600)
    with pytest.raises(verified.KeyRefused, match=str(made)):
        verified.cache_key(config, cache)


def test_worker_processes_give_the_verdicts_one_process_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runlist, "PARALLEL_FROM", 2)
    folder = _runs(tmp_path, 4)
    victim = folder / "20261201-000002-000002"
    _edit_in_place(victim / "audit.jsonl", b'"turn":1', b'"turn":8')
    listed = _list(folder, Cache(tmp_path / "cache" / verified.NAME, KEY))
    assert _cells(listed) == _cells(_list(folder, None))
    assert listed[victim.name].verified == "tampered"


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pristine_run(tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("case", [*CASES, *DAMAGED], ids=str)
def test_the_hostile_corpus_lists_the_same_remembered_or_not(case: Case, corpus_run: Path, tmp_path: Path) -> None:
    case.build(corpus_run, tmp_path / "runs", tmp_path / "out")
    store = tmp_path / "cache" / verified.NAME
    honest = _cells(_list(tmp_path / "runs", None))
    assert _cells(_list(tmp_path / "runs", Cache(store, KEY))) == honest
    assert _cells(_list(tmp_path / "runs", Cache(store, KEY))) == honest
