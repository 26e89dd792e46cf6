"""The shipped benchmark: supervisor overhead per action, ``verify`` throughput and the local desktop's
capture and input, side by side with baselines.

Run ``python -m cua_tui.bench`` (or ``python -m cua_tui.bench core``: sections 1-3),
``python -m cua_tui.bench local`` (section 4, needs the desktop's programs plus xdotool and scrot) or
``python -m cua_tui.bench all`` (both); ``--quick`` is a smoke run of a few seconds, ``--json PATH`` also
writes the results as JSON, ``--check`` holds each ratio of ours to its same-run baseline to its target
(:mod:`.check`, docs/benchmarks-gate.md). Everything happens in a temporary directory.

What is measured (``time.perf_counter_ns``; medians and p90 over many samples):

1. Supervisor overhead per action, the micro figure: ``parse_openai`` of a realistic mix (click, type,
   keypress, scroll, move) + ``Policy.default().classify`` + the four events the supervisor emits for an
   executed action (proposal, verdict, decision, outcome), each appended through a real ``AuditWriter``
   and dispatched to one listener that appends to a list, exactly as ``Supervisor._emit`` does. With and
   without an fsync per line. Target: a median under 1 ms per action without fsync.
   Baseline: the seed executor's ``audit()`` (``json.dumps(sort_keys=True)`` + sha256 + ``open("a")`` per
   line) writing the same four records per action, timed interleaved with our four ``AuditWriter.append``.
2. The same actions end to end through the real ``Supervisor`` on the dry desktop (a cached blank frame;
   the screenshot store dedupes it) with a scripted agent and an approver that approves: run time divided
   by actions (nothing subtracted), and the distribution of outcome-to-outcome intervals.
3. ``verify`` throughput: a 100,000-event run directory (realistic records, HMAC-signed seal in result.json,
   a few screenshots referenced by ``screen`` events) checked by ``verify_run``; target 200,000 events/s.
   Baseline: the obvious verifier (``json.loads`` per line + ``hashlib``, seal and screenshots checked).
4. The local desktop (``local``): one ``LocalDesktop`` at 1024x720 with the form lab; the seeds' way, one
   subprocess per step on the same display (``scrot -o FILE`` + reading the file; ``xdotool mousemove X Y
   click 1`` then scrot; ``xdotool type --delay 25`` of 20 characters then scrot), against ours
   (``desktop.screenshot()``; ``desktop.perform(click)`` and ``desktop.perform(type)``, which return the
   settled screenshot after the input), timed sample by sample, alternately first. The field is clicked
   after an untimed click elsewhere (so the click visibly focuses it) and cleared between samples
   (ctrl+a, BackSpace, untimed). Targets: screenshot median at most 25 ms; click + screenshot at least 3x
   and typing + screenshot at least 5x faster than the seeds' way. Also reported: PNG sizes, how many
   step screenshots equal the screen 150 ms later ("fresh"), and a correctness check first: the phrase
   typed with no delay, then Verify, must be accepted by the lab's server.

Modules: one per suite (:mod:`.supervisor`, :mod:`.verify`, :mod:`.local`, :mod:`.tui`, which also runs
alone as ``python -m cua_tui.bench.tui``), :mod:`.common` (sizes, statistics, the action mix),
:mod:`.report` (the text report) and ``__main__`` (the command line).
"""

from __future__ import annotations
