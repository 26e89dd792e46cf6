"""The chain walk: follow audit.jsonl line by line, check every link and what each record must carry, and
stop at the first finding. This is the verifier's hot loop (``python -m bench verify``)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ..decisions import ANSWERS, counted_as
from ..safeio import LINE_BAD_UTF8, LINE_CAP, LINE_INCOMPLETE, LineReader
from .breaks import context, explain
from .chain import BAD_RECORD, GENESIS, SHA_RE, Rare, decode_decided, decode_ended, decode_envelope, decode_rare
from .errors import UnusableInput
from .findings import Finding, FindingKind, edited
from .keys import ALGORITHMS, AuditKey, Checker, checkpoint_message

# distinct screenshots, or actions awaiting an outcome: far beyond any real run
MAX_TRACKED = 200_000
_ACTION_KINDS = frozenset(("proposal", "executing", "outcome"))
_KEY_ID_RE = re.compile(r"^[0-9a-f]{16}$")


@dataclass
class Walk:
    """What the chain walk learned besides the chain itself."""

    count: int = 0
    head: str = GENESIS
    run_id: str | None = None
    # run_started's "signed": None when the log predates it
    run_signed: bool | None = None
    signer: tuple[str, str] | None = None  # (algorithm, key_id) from run_started
    checkpoint: int | None = None  # last checkpoint whose signature was checked
    screens: dict[str, int] = field(default_factory=dict)  # sha -> first line referencing it
    # sha -> (width, height) first recorded
    sizes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    proposals: int = 0  # proposed actions (the run's steps)
    # requests answered, by a person, a headless rule, a command or a deadline (core/decisions.py)
    decisions: int = 0
    # the status the run_ended record gives (None: no such record, or not a word of ASCII letters)
    ended: str | None = None
    # proposed, no outcome: -> line
    pending: dict[tuple[int, int], int] = field(default_factory=dict)
    # handed to the desktop: -> line
    executing: dict[tuple[int, int], int] = field(default_factory=dict)


def action_name(slot: tuple[int, int]) -> str:
    """How a (turn, index) is named in findings and notes."""
    return f"turn {slot[0]}, action {slot[1] + 1}"


def walk_chain(
    reader: LineReader,
    seal: dict[str, Any] | None,
    key: AuditKey | None,
    findings: list[Finding],
    notes: list[str],
    run_dir: Path,
) -> Walk:
    """Follow the chain line by line; stop at the first finding (appended to ``findings``).

    One long function on purpose: it runs once per line of a log of up to millions of lines, and every
    call or attribute lookup on that path costs throughput (the verify benchmark). Everything that happens
    only once or on a bad line is a helper; what stays inline is what every line needs."""
    walk = Walk()
    screens, sizes, pending, executing = walk.screens, walk.sizes, walk.pending, walk.executing
    proposals = decisions = 0
    run_id = None
    expected_prev = GENESIS
    count = 0
    sealed_events = seal["events"] if seal is not None else -1
    sealed_head = seal["head"] if seal is not None else None
    check = key.checker() if key is not None else None
    sha256 = hashlib.sha256
    decode = decode_envelope
    found = findings.append
    number = 0
    for lines, marks in reader.blocks():
        base = number
        for line in lines:
            number += 1
            if count == sealed_events and expected_prev == sealed_head:
                # the sealed part is whole: anything after it, well-formed or not, was appended
                found(appended(number, count))
                break
            if marks is not None and (status := marks.get(number - base - 1)):
                _bad_line(status, number, seal, findings, notes, run_dir)
                break
            digest = sha256(line).hexdigest()
            try:
                env = decode(line)
            except BAD_RECORD:
                found(Finding(FindingKind.MALFORMED_RECORD, "not a valid JSON record (edited)", number))
                break
            seq, prev, kind = env.seq, env.prev, env.kind
            if type(seq) is not int or type(prev) is not str or type(kind) is not str or type(env.run) is not str:
                found(Finding(FindingKind.MALFORMED_RECORD, "missing seq, run, prev or kind (edited)", number))
                break
            if prev != expected_prev or seq != count:
                found(_broken_link(reader, number, seq, prev, digest, count, expected_prev, seal))
                break
            if run_id is None:
                run_id = env.run
                problem = _first_record(line, kind, walk, key, number)
                if problem:
                    found(problem)
                    break
            elif env.run != run_id:
                found(_other_run(reader, number, seq, prev, count, env.run, run_id))
                break
            if kind == "screen":
                sha = env.sha256
                if type(sha) is not str or not SHA_RE.match(sha):
                    found(edited(number, "a screen event without a valid sha256"))
                    break
                if sha not in screens:
                    if len(screens) >= MAX_TRACKED:
                        raise UnusableInput(f"{run_dir}: more than {MAX_TRACKED:,} distinct screenshots: not checked")
                    screens[sha] = number
                    sizes[sha] = (env.width, env.height)
            elif kind in _ACTION_KINDS:
                turn, index = env.turn, env.index
                if type(turn) is not int or type(index) is not int:
                    article = "an" if kind[0] in "aeiou" else "a"
                    found(edited(number, f"{article} {kind} record without an integer turn and index"))
                    break
                slot = (turn, index)
                if kind == "proposal":
                    if slot in pending:
                        found(edited(number, f"a second proposal for {action_name(slot)} before its outcome"))
                        break
                    if len(pending) >= MAX_TRACKED:
                        raise UnusableInput(
                            f"{run_dir}: more than {MAX_TRACKED:,} actions await an outcome: not checked"
                        )
                    pending[slot] = number
                    proposals += 1
                elif kind == "executing":
                    if slot not in pending or slot in executing:
                        found(edited(number, f"executing {action_name(slot)}, which awaits no execution"))
                        break
                    executing[slot] = number
                else:
                    if pending.pop(slot, None) is None:
                        found(edited(number, f"an outcome for {action_name(slot)}, which awaits none"))
                        break
                    executing.pop(slot, None)
            elif kind == "decision":
                said = decode_decided(line)
                if counted_as(said.decision, said.by, said.note) in ANSWERS:
                    decisions += 1
            elif kind == "run_ended":
                status = decode_ended(line).status
                # a word (RunStatus's are): a control character or a sentence is no status
                word = type(status) is str and len(status) <= 32 and status.isascii() and status.isalpha()
                walk.ended = status if word else None
            elif kind == "checkpoint":
                problem = check_checkpoint(decode_rare(line), walk, count, expected_prev, run_id, check, number)
                if problem:
                    found(problem)
                    break
            expected_prev = digest
            count += 1
        else:
            continue
        break  # a finding: the inner loop broke out
    walk.count, walk.head, walk.run_id = count, expected_prev, run_id
    walk.proposals, walk.decisions = proposals, decisions
    return walk


def appended(line: int, sealed_at: int) -> Finding:
    """A line after the sealed part of the chain."""
    return Finding(FindingKind.APPENDED_AFTER_SEAL, f"appended after the run was sealed at {sealed_at} events", line)


def _bad_line(
    status: int, number: int, seal: dict[str, Any] | None, findings: list[Finding], notes: list[str], run_dir: Path
) -> None:
    """A line safeio flagged: cut short, not UTF-8, or too long to be a record (unusable input)."""
    if status == LINE_INCOMPLETE:
        if seal is None and not findings:
            notes.append(f"line {number}: incomplete last line (write interrupted); ignored")
            return
        findings.append(
            Finding(FindingKind.TRUNCATED, "incomplete line without a newline (truncated or edited)", number)
        )
    elif status == LINE_BAD_UTF8:
        findings.append(
            Finding(FindingKind.MALFORMED_RECORD, "not a valid JSON record (invalid UTF-8; edited)", number)
        )
    else:
        raise UnusableInput(
            f"{run_dir}: audit.jsonl line {number} is longer than {LINE_CAP >> 20} MiB: "
            f"not an audit record; not checked"
        )


def _broken_link(
    reader: LineReader,
    number: int,
    seq: int,
    prev: str,
    digest: str,
    count: int,
    expected_prev: str,
    seal: dict[str, Any] | None,
) -> Finding:
    ctx = context(reader, number, seq, prev, count)
    if not ctx.has_next and seal is not None:
        # the seal links to the last line as a next line would
        ctx.next_prev = seal["head"]
    return explain(number, seq, prev, digest, count, expected_prev, ctx)


def _other_run(reader: LineReader, number: int, seq: int, prev: str, count: int, run: str, run_id: str) -> Finding:
    """A line of another run: inserted when the next line links past it, else edited."""
    if context(reader, number, seq, prev, count).next_prev == prev:
        return Finding(FindingKind.INSERTED, f"inserted (it belongs to run {run!r}, not {run_id!r})", number)
    return edited(number, f"it belongs to run {run!r}, not {run_id!r}")


def _first_record(line: bytes, kind: str, walk: Walk, key: AuditKey | None, number: int) -> Finding | None:
    """Line 1 names the run and (run_started) whether it is signed, and by which key."""
    signed = decode_rare(line).signed if kind == "run_started" else msgspec.UNSET
    problem = _read_signed(signed, walk, number)
    if problem:
        return problem
    if key is not None and walk.signer is not None and walk.signer != (key.algorithm, key.key_id):
        return Finding(
            FindingKind.WRONG_KEY,
            f"the signatures are not by this key: run_started names {walk.signer[0]} key {walk.signer[1]}, "
            f"the key given is {key.algorithm} key {key.key_id} (wrong --key, or the log was re-signed)",
        )
    return None


def _read_signed(signed: Any, walk: Walk, number: int) -> Finding | None:
    """run_started's ``signed``: {"algorithm", "key_id"} or null. A finding when it is malformed."""
    if signed is msgspec.UNSET:
        return None
    if signed is None:
        walk.run_signed = False
        return None
    if (
        isinstance(signed, dict)
        and signed.get("algorithm") in ALGORITHMS
        and isinstance(signed.get("key_id"), str)
        and _KEY_ID_RE.match(signed["key_id"])
    ):
        walk.run_signed = True
        walk.signer = (signed["algorithm"], signed["key_id"])
        return None
    return edited(number, "run_started's signed field is malformed")


def check_checkpoint(
    env: Rare,
    walk: Walk,
    count: int,
    expected_prev: str,
    run_id: str | None,
    check: Checker | None,
    number: int,
) -> Finding | None:
    """A checkpoint fixes the count and head before it, signed like the seal; None when it holds."""
    if walk.signer is None:
        return edited(number, "a signed checkpoint in a run that run_started records as unsigned")
    if env.events != count or type(env.events) is not int or env.head != expected_prev:
        return edited(number, "a checkpoint that does not match the chain before it")
    sig = env.signature
    if (
        not isinstance(sig, dict)
        or (sig.get("algorithm"), sig.get("key_id")) != walk.signer
        or not isinstance(sig.get("value"), str)
    ):
        return edited(number, "a checkpoint without a signature by the run's key")
    if check is not None:
        if not check(checkpoint_message(run_id or "", count, expected_prev), sig["value"]):
            return Finding(
                FindingKind.SIGNATURE_MISMATCH,
                "the checkpoint's signature does not match: the chain was recomputed or edited",
                number,
            )
        walk.checkpoint = count
    return None
