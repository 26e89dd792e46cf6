"""The chain's line format, shared by the writer and the verifier.

One JSON object per line with at least ``seq``, ``ts``, ``run``, ``kind`` and ``prev``; line n+1's ``prev``
is the SHA-256 hex of the exact bytes of line n (without its newline), line 0's is :data:`GENESIS`.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ..text import encodable

GENESIS = "0" * 64
SHA_RE = re.compile(r"^[0-9a-f]{64}$")

_encoder = msgspec.json.Encoder()


def encode_record(record: Any) -> bytes:
    """JSON bytes of a record, a line of the log or a whole run file (run.json, result.json, fleet.json): the
    one encoder of what a run writes. It never fails on text: a string UTF-8 cannot carry (a lone surrogate
    from a model's JSON, a script, or a command-line argument or path that was not UTF-8) is recorded with
    each lone surrogate as its visible escape (``text.encodable``), so every ending can still be written."""
    try:
        return _encoder.encode(record)
    except UnicodeEncodeError:
        # Rare, so the fast path above stays msgspec's own: only now is the value walked, as plain
        # data (dataclasses, structs, enums become dicts and strings) so that no string is left
        # unvisited.
        return _encoder.encode(_encodable(msgspec.to_builtins(record)))


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(v) for v in value]
    return value


class Envelope(msgspec.Struct):
    """The fields the verifier reads from every line; each one costs time on every line, so only these."""

    seq: Any = None
    run: Any = None
    kind: Any = None
    prev: Any = None
    sha256: Any = None  # screen
    turn: Any = None  # proposal, executing, outcome
    index: Any = None
    # screen: the size recorded, checked against the PNG's header
    width: Any = None
    height: Any = None


class Rare(msgspec.Struct):
    """Fields of the rare records (line 1, checkpoints), decoded apart: each field of the envelope costs
    time on every line."""

    # run_started: absent in logs written before runs recorded it
    signed: Any = msgspec.UNSET
    events: Any = None  # checkpoint
    head: Any = None
    signature: Any = None


class Decided(msgspec.Struct):
    """A decision record's fields that say what it counts as (core/decisions.py), decoded apart: a decision is
    one line in many."""

    decision: Any = None
    by: Any = None
    note: Any = None


class Ended(msgspec.Struct):
    """The run_ended record's status, the run's end as the record has it (result.json's is not sealed)."""

    status: Any = None


decode_envelope = msgspec.json.Decoder(Envelope).decode
decode_rare = msgspec.json.Decoder(Rare).decode
decode_decided = msgspec.json.Decoder(Decided).decode
decode_ended = msgspec.json.Decoder(Ended).decode
BAD_RECORD = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)
