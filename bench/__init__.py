"""The shipped benchmark: supervisor overhead per action, ``verify`` throughput and the local desktop's
capture and input, side by side with baselines: ``python -m bench [SUITE] [--quick] [--json PATH]``.

Modules: one per suite, :mod:`.common` (sizes, statistics, the action mix), :mod:`.report` (the text
report), :mod:`.check` (``--check``: each same-run ratio against its target, docs/benchmarks-gate.md)
and ``__main__`` (the command line). What each suite measures, and the figures: docs/benchmarks.md.
"""

from __future__ import annotations
