"""The fleet benchmark's keys part (bench/fleet.py) on a small fleet: the simulated analyst answers at
the keys, with the queue's groups and without, and the part's own checks hold."""

from __future__ import annotations

from pathlib import Path

from bench.fleet import ANALYST, _keys_lines, bench_fleet_keys


def test_groups_take_fewer_keys_and_no_answer_leaves_its_group(tmp_path: Path) -> None:
    # a quick reader: the part's logic, not its figures, is the point here
    grouped = bench_fleet_keys(tmp_path, 6, 3, True, read_s=(0.05, 0.1))
    single = bench_fleet_keys(tmp_path, 3, 3, False, read_s=(0.05, 0.1))
    assert grouped["decisions"] == 6 and grouped["passed"] == 6 and grouped["intact"] == 6
    assert grouped["presses"] < grouped["decisions"] and grouped["largest_group"] > 1
    assert grouped["answers_outside_their_group"] == 0 and grouped["decided_in_groups"] >= 2
    assert single["presses"] == single["decisions"] == 3 and single["decided_in_groups"] == 0
    header, row = grouped["stats"]
    assert header.split()[0] == "OPERATOR" and row.split()[:2] == [ANALYST, "6"]
    lines = _keys_lines([grouped, single])
    assert lines[0].startswith("keys, grouping on: 6 sim runs") and any("grouping off" in line for line in lines)
