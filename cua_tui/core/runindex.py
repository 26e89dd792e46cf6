"""A run's audit log indexed for reading back at any length: what replay holds is what it shows.

One pass over the log (``advance``, a block at a time, in the background) keeps, per line, its offset
(core/runlog), per step a mark (its lines, turn and flags), per turn where its steps begin and the
timeline builder's context there, every ``CHECKPOINT_EVERY`` lines a copy of the RunView, and the hash of
each checkpoint's line and each turn's last line. A step is rebuilt from its turn's lines alone (``step``),
the RunView at any line folded from the nearest checkpoint (``view``), any lines read again (``events``),
each held to the hashes kept (``untrusted`` says from where they no longer hold; ``confirm`` holds the pass
to the head ``verify`` checked). Nothing holds the run's events: about 150 bytes a step, whatever it says.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from array import array
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass

from . import events as ev
from . import timeline as tl
from .run_view import RunView
from .runlog import LogChanged, RunLog

# a RunView snapshot every so many lines (about 4 KB each): any line's state is at most this many folds away
CHECKPOINT_EVERY = 512
# read this much of the log per ``advance`` step while holding the lock (a few ms of work; replay's first
# block, its background reading asks for less at a time)
ADVANCE_BYTES = 128 << 10
# turns rebuilt in full, kept for the steps shown and their neighbours
TURNS_KEPT = 6
# steps of one turn held whole while it is read: a supervisor proposes at most 100 a turn, so only an
# edited log has more; past this its steps are released in parts (a later event for a released one then
# belongs to no step, as a late one always does)
MAX_OPEN_STEPS = 1024
_FLAG_BITS = {flag: 1 << n for n, flag in enumerate((tl.DECISION, tl.REFUSAL, tl.ERROR, tl.EGRESS, tl.TAKEOVER))}


def _bits(flags: frozenset[str]) -> int:
    return sum(bit for flag, bit in _FLAG_BITS.items() if flag in flags)


def _digest(head: str) -> bytes:
    """A line's hash as kept (32 bytes; an unreadable line's, which matches no line, as zeros)."""
    return bytes.fromhex(head) if len(head) == 64 else bytes(32)


def _changed(number: int, seq: int) -> tl.Step:
    """A step the log no longer holds where it was read (the file was changed while it was open)."""
    proposal = ev.ActionProposed(0, 0, "", None, error="this line of the log changed after it was read")
    return tl.Step(number, 0, 0, seq, seq, proposal)


@dataclass(frozen=True, slots=True)
class Turn:
    """The steps of one turn (consecutive proposals of one turn number): where they begin, and the builder's
    context just before the first of them, without the model's words (``text_seq``: the line of the
    model_turn that said them, -1 for none; read again with the turn, so that no turn's words are held)."""

    first_step: int
    first_seq: int
    context: tl.Context
    text_seq: int = -1


class Turns:
    """The released turns, in order, in about 60 bytes each: each turn's first step and line, the line of its
    model_turn, and the builder's context there with each screen a number into one table of names. A list of
    ``Turn`` objects with their contexts cost about 300 bytes a turn, and a run may have as many turns as
    steps (docs/benchmarks.md, replay)."""

    def __init__(self) -> None:
        self._first_step, self._first_seq, self._text_seq = array("q"), array("q"), array("q")
        self._observed, self._latest, self._takeovers = array("q"), array("q"), array("q")
        self._takeover: dict[int, ev.TakeoverStarted] = {}  # turns during a takeover (few)
        self._names: list[str] = []
        self._numbers: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._first_step)

    def append(self, turn: Turn) -> None:
        context = turn.context
        if context.takeover is not None:
            self._takeover[len(self)] = context.takeover
        self._first_step.append(turn.first_step)
        self._first_seq.append(turn.first_seq)
        self._text_seq.append(turn.text_seq)
        self._observed.append(self._number(context.observed))
        self._latest.append(self._number(context.latest))
        self._takeovers.append(context.takeovers)

    def __getitem__(self, where: int) -> Turn:
        """Turn ``where`` (its context without the model's words: ``text_seq`` says where they are)."""
        first = self._first_step[where]
        observed, latest = self._name(self._observed[where]), self._name(self._latest[where])
        context = tl.Context(first, observed, latest, "", self._takeover.get(where), self._takeovers[where])
        return Turn(first, self._first_seq[where], context, self._text_seq[where])

    def first_step(self, where: int) -> int:
        return self._first_step[where]

    def firsts(self) -> list[int]:
        """The first step of each turn."""
        return self._first_step.tolist()

    def _number(self, name: str | None) -> int:
        if name is None:
            return -1
        number = self._numbers.get(name)
        if number is None:
            number = self._numbers[name] = len(self._names)
            self._names.append(name)
        return number

    def _name(self, number: int) -> str | None:
        return self._names[number] if number >= 0 else None


class StepKeys:
    """Each (turn, index) proposed, with the number of the first step proposed under it, in about 16 bytes a
    step: a run proposes them in increasing order, kept in two arrays searched by bisection; one out of
    order or out of range (only an edited log has them) is kept in a dict. A dict of every key cost about
    170 bytes a step, the most of a 100,000-step run's index (docs/benchmarks.md, replay)."""

    def __init__(self) -> None:
        self._keys, self._numbers = array("q"), array("q")
        self._odd: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        return len(self._keys) + len(self._odd)

    def add(self, key: tuple[int, int], number: int) -> None:
        """``key`` proposed as step ``number``; its first number is kept."""
        packed = _packed(key)
        if packed is not None and (not self._keys or packed > self._keys[-1]):
            self._keys.append(packed)
            self._numbers.append(number)
        elif self.get(key) is None:
            self._odd[key] = number

    def get(self, key: tuple[int, int]) -> int | None:
        """The number of the first step proposed under ``key`` (None: none was)."""
        packed = _packed(key)
        if packed is not None:
            at = bisect_left(self._keys, packed)
            if at < len(self._keys) and self._keys[at] == packed:
                return self._numbers[at]
        return self._odd.get(key)


def _packed(key: tuple[int, int]) -> int | None:
    turn, index = key
    return turn << 31 | index if 0 <= turn < 1 << 31 and 0 <= index < 1 << 31 else None


class RunIndex:
    """The index of one run's log (``RunLog``), built by ``advance`` and read by the other methods; a lock
    makes it safe to build in one thread and read in another."""

    def __init__(self, log: RunLog) -> None:
        self.log = log
        self.lock = threading.RLock()
        self._recorded: dict[str, int] = {}  # screen -> the line that first recorded it
        self._first_number = StepKeys()  # (turn, index) -> its first step's number
        self._text_seq = -1  # the newest model_turn's line
        self._builder = tl.Builder(recorded=self._recorded, outside=self._released_key)
        self._view = RunView()
        self._checkpoints: list[RunView] = [RunView()]  # the state before line k * CHECKPOINT_EVERY
        # per released step: its first line, the last that touched it, its turn and its flags
        self._first_seq, self._last_seq = array("q"), array("q")
        self._touched: dict[int, int] = {}  # open step's number -> the last line that touched it
        self._turn_of, self._flags = array("q"), bytearray()
        self._turns = Turns()  # released turns, in order
        self._open: Turn | None = None  # the turn the builder holds now
        self._rebuilt: OrderedDict[int, list[tl.Step]] = OrderedDict()  # turn position -> its steps
        # the RunView shown and the one asked about, each with how many lines it has folded
        self._shown: list[object] = [RunView(), 0]
        self._probe: list[object] = [RunView(), 0]
        # kept hashes (32 bytes each): of line k * CHECKPOINT_EVERY - 1, and of each released turn's last
        # line (``_ends``, in order), against which lines read again are held
        self._marks = bytearray()
        self._ends, self._end_hashes = array("q"), bytearray()
        self._open_end: tuple[int, str] = (-1, "")  # the open turn's last line so far, and its hash
        self._last_good: tuple[int, str] = (-1, "")  # the last line that linked, as first read
        # (line, head) verify checked, not read yet; and whether more lines may come (a run followed)
        self._expected: tuple[int, str] | None = None
        self._more = False
        self.changed: int | None = None  # the first line of a span found changed since first read
        self.done = False  # the whole log as it stands has been read
        self.done_at = 0.0  # when it first was (time.monotonic)

    # ---------------------------------------------------------------------------------------------
    # Building
    # ---------------------------------------------------------------------------------------------
    def advance(self, limit: int | None = None) -> int:
        """Read up to about ``limit`` more bytes of the log (``ADVANCE_BYTES``); returns how many (0: at the
        end of what is written so far, and ``done`` says so)."""
        with self.lock:
            before = self.log.offset
            for stamped in self.log.poll(ADVANCE_BYTES if limit is None else limit):
                self._take(stamped)
            read = self.log.offset - before
            self.done = not read and self.log.offset >= self.log.size()
            if self.done and self._expected is not None and not self._more:
                self._confirm(self._expected[0], "", self._expected[1])  # the log verified was longer
            if self.done and not self.done_at:
                self.done_at = time.monotonic()
            return read

    def _take(self, stamped: ev.Stamped) -> None:
        event = stamped.event
        if isinstance(event, ev.ActionProposed):
            current = self._open_steps()
            context = self._builder.context()
            if not current or current[-1].turn != event.turn or len(current) >= MAX_OPEN_STEPS:
                self._release()
                context = self._builder.context()
                self._open = Turn(context.number, stamped.seq, context, self._text_seq)
            self._first_number.add((event.turn, event.index), context.number)
        elif isinstance(event, ev.ModelTurn):
            self._text_seq = stamped.seq
        for step in self._builder.feed([stamped]):
            # the last line that says something of the step (an egress or a hand-back after its outcome
            # too): a rebuild of its turn reads up to there
            self._touched[step.number] = stamped.seq
            self._open_end = (stamped.seq, stamped.head)
        self._view.apply(stamped)
        if self.log.broken is None or stamped.seq < self.log.broken:
            self._last_good = (stamped.seq, stamped.head)
        if self._expected is not None and self._expected[0] == stamped.seq:
            self._confirm(stamped.seq, stamped.head, self._expected[1])
        if (stamped.seq + 1) % CHECKPOINT_EVERY == 0:
            self._checkpoints.append(self._view.snapshot())
            self._marks += _digest(stamped.head)

    def _open_steps(self) -> list[tl.Step]:
        return self._builder.timeline.steps

    def _release(self) -> None:
        """The turn the builder holds is over: keep a mark of each of its steps, not the steps."""
        if self._open is None:
            return
        last = -1
        for step in self._builder.release():
            self._first_seq.append(step.first_seq)
            self._last_seq.append(self._touched.pop(step.number, step.last_seq))
            last = max(last, self._last_seq[-1])
            self._turn_of.append(len(self._turns))
            self._flags.append(_bits(step.flags))
        if last == self._open_end[0] and (not self._ends or last > self._ends[-1]):
            self._ends.append(last)
            self._end_hashes += _digest(self._open_end[1])
        self._turns.append(self._open)
        self._open = None

    def _released_key(self, key: tuple[int, int]) -> bool:
        number = self._first_number.get(key)
        return number is not None and number < len(self._flags)

    # ---------------------------------------------------------------------------------------------
    # Reading
    # ---------------------------------------------------------------------------------------------
    @property
    def lines(self) -> int:
        return self.log.lines

    @property
    def timeline(self) -> tl.Timeline:
        """The run's timeline as far as read: its events count, start, end and verification (``steps``
        holds only the open turn's: use ``count`` and ``step``)."""
        return self._builder.timeline

    @property
    def count(self) -> int:
        """Steps read so far."""
        with self.lock:
            return len(self._flags) + len(self._open_steps())

    def progress(self) -> float:
        """How much of the log has been read, from 0 to 1."""
        size = self.log.size()
        return 1.0 if self.done or not size else min(1.0, self.log.end / size)

    def current(self) -> int | None:
        """The number of the step the newest events belong to (a followed run's step under way)."""
        with self.lock:
            step = self._builder.current
            return step.number if step is not None else None

    def flags(self, number: int) -> int:
        """Step ``number``'s flags as bits (``has``)."""
        with self.lock:
            if number < len(self._flags):
                return self._flags[number]
            return _bits(self.step(number).flags)

    def find(self, flag: str, start: int, direction: int) -> int | None:
        """The next (or previous) step from ``start`` (excluded) with ``flag``."""
        bit = _FLAG_BITS[flag]
        with self.lock:
            count, released, flags = self.count, len(self._flags), self._flags
            order = range(start + 1, count) if direction > 0 else range(min(start, count) - 1, -1, -1)
            for number in order:
                if (flags[number] if number < released else self.flags(number)) & bit:
                    return number
        return None

    def turn_firsts(self) -> list[int]:
        """The number of the first step of each turn."""
        with self.lock:
            firsts = self._turns.firsts()
            if self._open is not None and self._open_steps():
                firsts.append(self._open.first_step)
            return firsts

    def step(self, number: int) -> tl.Step:
        """Step ``number`` in full, rebuilt from its turn's lines (the open turn's from the builder)."""
        with self.lock:
            released = len(self._flags)
            if number >= released:
                return self._open_steps()[number - released]
            where = self._turn_of[number]
            steps = self._rebuilt.get(where)
            if steps is None:
                steps = self._rebuild(where)
            self._rebuilt.move_to_end(where)
            return steps[number - self._turns.first_step(where)]

    def _rebuild(self, where: int) -> list[tl.Step]:
        turn = self._turns[where]
        end = self._turns.first_step(where + 1) if where + 1 < len(self._turns) else len(self._flags)
        last = max(self._last_seq[n] for n in range(turn.first_step, end))
        try:
            context = dataclasses.replace(turn.context, text=self._words(turn.text_seq))
            builder = tl.Builder(context, self._recorded, outside=lambda key: self._before(key, turn.first_step))
            for start in range(turn.first_seq, last + 1, CHECKPOINT_EVERY):  # never the whole span in memory
                builder.feed(self._read(start, min(start + CHECKPOINT_EVERY, last + 1)))
        except LogChanged:
            builder = tl.Builder(turn.context, self._recorded)  # none of it is shown as it reads now
        steps = builder.timeline.steps[: end - turn.first_step]
        if len(steps) < end - turn.first_step:
            # the log changed under the reader after it was indexed: say so rather than show another step
            steps += [_changed(n, self._first_seq[n]) for n in range(turn.first_step + len(steps), end)]
        self._rebuilt[where] = steps
        while len(self._rebuilt) > TURNS_KEPT:
            self._rebuilt.popitem(last=False)
        return steps

    def _words(self, seq: int) -> str:
        """What the model said in the model_turn at line ``seq`` (read again, held to the chain)."""
        said = self._read(seq, seq + 1) if seq >= 0 else []
        return said[0].event.text if said and isinstance(said[0].event, ev.ModelTurn) else ""

    def _before(self, key: tuple[int, int], first_step: int) -> bool:
        number = self._first_number.get(key)
        return number is not None and number < first_step

    def events(self, start: int, stop: int) -> list[ev.Stamped]:
        """Lines ``start`` to ``stop`` as events, read again from the log (held to the hashes kept: lines
        changed since are each a note saying so)."""
        with self.lock:
            try:
                return self._read(start, stop)
            except LogChanged:
                changed = "changed after it was read (the chain no longer holds)"
                return [
                    ev.Stamped(n, "", ev.Note(f"line {n + 1}: {changed}")) for n in range(start, min(stop, self.lines))
                ]

    def _read(self, start: int, stop: int) -> list[ev.Stamped]:
        """Lines ``start`` to ``stop`` read again, each held to the chain as first read up to the next hash
        kept (LogChanged, and ``changed`` set, when they are not). Lines from the first that did not link
        the first time are read as they are: the verdict says they are untrusted."""
        start, stop = max(0, start), min(stop, self.lines)
        if start >= stop:
            return []
        broken = self.log.broken
        if broken is not None and stop > broken:
            return self._read(start, broken) + self.log.read(max(start, broken), stop)
        out: list[ev.Stamped] = []
        while start < stop:
            # from one kept hash to the next: a change is placed after the last one that still holds
            anchor, kept = self._anchor(start)
            upto = min(stop, anchor + 1)
            try:
                out += self.log.read_chained(start, upto, anchor, kept)
            except LogChanged:
                self._mark(start)
                raise
            start = upto
        return out

    def _anchor(self, line: int) -> tuple[int, str]:
        """The first line at or after ``line`` whose hash was kept (before any line that did not link)."""
        found = self._last_good
        at = (line // CHECKPOINT_EVERY) * CHECKPOINT_EVERY + CHECKPOINT_EVERY - 1
        if (line // CHECKPOINT_EVERY + 1) * 32 <= len(self._marks) and at < found[0]:
            where = 32 * (line // CHECKPOINT_EVERY)
            found = (at, self._marks[where : where + 32].hex())
        where = bisect_left(self._ends, line)
        if where < len(self._ends) and self._ends[where] < found[0]:
            found = (self._ends[where], self._end_hashes[32 * where : 32 * where + 32].hex())
        return found

    def _mark(self, line: int) -> None:
        self.changed = line if self.changed is None else min(self.changed, line)

    def confirm(self, lines: int, head: str, *, more: bool = False) -> bool:
        """Hold the lines read to what ``verify`` checked: its first ``lines`` lines ending on ``head``.
        False (and ``changed`` set) when they are not those; a line not read yet is checked when it is
        (and, unless ``more`` lines may still be written, the log read to its end without it is not the
        log verified)."""
        with self.lock:
            if lines <= 0:
                return True
            if lines > self.lines:
                self._expected, self._more = (lines - 1, head), more
                if self.done and not more:
                    while self.advance():
                        pass  # lines written since the pass reached the end (checked as they are read)
                return self.changed != 0
            if self.log.broken is not None and self.log.broken < lines:
                return self._confirm(lines - 1, "", head)
            try:
                read = self._read(lines - 1, lines)
            except LogChanged:
                return False
            return self._confirm(lines - 1, read[0].head if read else "", head)

    def _confirm(self, line: int, ours: str, verified: str) -> bool:
        self._expected = None
        if ours == verified and (self.log.broken is None or self.log.broken > line):
            return True
        # somewhere up to ``line`` the log read is not the log verified: none of it is vouched for
        self._mark(0)
        return False

    @property
    def untrusted(self) -> int | None:
        """The first line that is not what the verdict checked as far as the index knows: the first that
        did not link when read, or the first of a span changed since (None: none found)."""
        with self.lock:
            found = [line for line in (self.log.broken, self.changed) if line is not None]
            return min(found) if found else None

    def view(self, upto: int) -> RunView:
        """The RunView after the first ``upto`` lines: folded from the nearest checkpoint (moving on from
        the last one asked for when that is nearer). The same object is returned each time, moved: the
        panes shown are bound to it."""
        return self._fold(self._shown, upto)

    def probe(self, upto: int) -> RunView:
        """As ``view``, in an object of its own: asking about another line does not move what is shown."""
        return self._fold(self._probe, upto)

    def _fold(self, slot: list[object], upto: int) -> RunView:
        with self.lock:
            upto = max(0, min(upto, self.lines))
            base = min(upto // CHECKPOINT_EVERY, len(self._checkpoints) - 1)
            folded, folded_to = slot
            assert isinstance(folded, RunView) and isinstance(folded_to, int)
            if upto < folded_to or folded_to < base * CHECKPOINT_EVERY:
                folded, folded_to = self._checkpoints[base].snapshot(), base * CHECKPOINT_EVERY
            try:
                span = self._read(folded_to, upto)
            except LogChanged:
                # nothing read since the checkpoint is shown: the state there, as first read
                folded, upto = self._checkpoints[base].snapshot(), base * CHECKPOINT_EVERY
                span = []
            for stamped in span:
                folded.apply(stamped)
            slot[:] = [folded, upto]
            return folded
