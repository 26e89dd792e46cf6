"""Where a chain link does not hold: name the first bad line and the likely tampering (an insert, a swap,
a deletion or an edit), from what the lines around it say."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..safeio import LINE_TOO_LONG, LineReader
from .chain import BAD_RECORD, GENESIS, decode_envelope
from .findings import Finding, FindingKind, edited

# lines after a broken link searched for the seq it lacks
_CONTEXT_AFTER = 100_000


@dataclass
class Context:
    """What the lines around a broken link say, to tell inserts, swaps, deletions and edits apart.
    Gathered by reading the log again (only when a link is broken), so the walk keeps no per-line state."""

    # the earlier line whose hash is the broken line's prev
    prev_line: int | None = None
    seq_line: int | None = None  # the earlier line with the broken line's seq
    # a later line carries the seq that was expected here
    seq_later: bool = False
    has_next: bool = False
    next_prev: Any = None
    next_hash: str | None = None


def context(reader: LineReader, number: int, seq: int, prev: str, expected_seq: int) -> Context:
    """Read the log again around line ``number`` (whose ``seq`` and ``prev`` broke the chain)."""
    ctx = Context()
    for n, (line, status) in enumerate(reader, 1):
        if n < number:
            _look_before(ctx, n, line, seq, prev)
            continue
        if n == number:
            continue
        ctx.has_next = True
        if status == LINE_TOO_LONG or n > number + _CONTEXT_AFTER:
            # a reordering is told from a deletion nearby; a huge tail is not read to its end
            break
        if n == number + 1:
            ctx.next_hash = hashlib.sha256(line).hexdigest()
        try:
            env = decode_envelope(line)
        except BAD_RECORD:
            continue
        if n == number + 1:
            ctx.next_prev = env.prev
        if type(env.seq) is int and env.seq == expected_seq:
            ctx.seq_later = True
    return ctx


def _look_before(ctx: Context, n: int, line: bytes, seq: int, prev: str) -> None:
    """An earlier line: is it the one the broken line links to, or the one whose seq it repeats?"""
    if hashlib.sha256(line).hexdigest() == prev:
        ctx.prev_line = n
    try:
        if decode_envelope(line).seq == seq:
            ctx.seq_line = n
    except BAD_RECORD:
        pass


def explain(
    number: int, seq: int, prev: str, digest: str, expected_seq: int, expected_prev: str, ctx: Context
) -> Finding:
    """Name the first bad line and the likely tampering where a chain link does not hold."""
    next_prev, next_hash = ctx.next_prev, ctx.next_hash
    if next_prev == expected_prev and ctx.seq_later and prev != next_hash:  # a swap also links past
        return Finding(FindingKind.INSERTED, f"inserted (the next line links past it to line {number - 1})", number)
    if seq == expected_seq:
        return _same_seq(number, digest, ctx)
    if seq > expected_seq:
        return _seq_ahead(number, seq, prev, expected_seq, expected_prev, ctx)
    return _seq_behind(number, seq, prev, expected_seq, expected_prev, ctx)


def _same_seq(number: int, digest: str, ctx: Context) -> Finding:
    """The seq is right but the prev is not: a reordering, or an edit of this line or the one before."""
    if ctx.prev_line is not None:
        where = ctx.prev_line
        return Finding(
            FindingKind.REORDERED,
            f"its prev points to line {where}, not to the line before it (lines reordered)",
            number,
        )
    if number == 1:
        return Finding(
            FindingKind.EDITED, "edited (its prev is not the genesis hash), or lines were deleted from the start", 1
        )
    if ctx.next_prev is not None and ctx.next_prev != digest:
        # the next link is broken too: this line changed
        return edited(number, f"its prev does not match line {number - 1}")
    return edited(number - 1, f"its hash no longer matches the prev recorded on line {number}")


def _seq_ahead(number: int, seq: int, prev: str, expected_seq: int, expected_prev: str, ctx: Context) -> Finding:
    """A seq larger than expected: an edited seq, a reordering, or lines deleted before this one."""
    if prev == expected_prev:
        return edited(number, f"seq {seq} where {expected_seq} was expected")
    if ctx.seq_later:
        return Finding(FindingKind.REORDERED, f"seq {seq} where {expected_seq} was expected (lines reordered)", number)
    missing = seq - expected_seq
    what = "line" if missing == 1 else "lines"
    return Finding(
        FindingKind.DELETED,
        f"seq {seq} where {expected_seq} was expected ({missing} {what} deleted before it)",
        number,
    )


def _seq_behind(number: int, seq: int, prev: str, expected_seq: int, expected_prev: str, ctx: Context) -> Finding:
    """A seq smaller than expected: a repeated seq (an edit or an insert), or a reordering."""
    if ctx.seq_line is not None and prev == expected_prev:
        return edited(number, f"seq {seq} repeats line {ctx.seq_line}")
    links_to = 0 if prev == GENESIS else ctx.prev_line
    if ctx.seq_line is not None and (links_to == ctx.seq_line - 1 or prev == expected_prev):
        return Finding(
            FindingKind.INSERTED, f"inserted (line {number} repeats its seq {seq} and links past it)", number - 1
        )
    if ctx.seq_line is not None:
        return Finding(
            FindingKind.REORDERED, f"seq {seq} repeats line {ctx.seq_line} (lines reordered or inserted)", number
        )
    return Finding(FindingKind.REORDERED, f"seq {seq} where {expected_seq} was expected (lines reordered)", number)
