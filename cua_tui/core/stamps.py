"""Timestamps on record: one way to write an instant as ISO 8601 (run.json, result.json, the fleet's record,
``runs --json``, the exports), always beside or instead of its epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_time(epoch: float) -> str:
    """``epoch`` seconds as ISO 8601 in UTC, to the millisecond (``2026-01-02T03:04:05.678+00:00``)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
