"""The fleet's tasks file (core/tasks.py) and the approval queue's order (core/fleet_queue.py)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from cua_tui.agents.vendors import VENDORS, specs
from cua_tui.core.actions import Action, Kind
from cua_tui.core.fleet_queue import ApprovalQueue, QueueItem, Tier, priority
from cua_tui.core.ports import DecisionRequest, SafetyCheck
from cua_tui.core.tasks import MAX_TASKS, MAX_TASKS_BYTES, TasksError, load_tasks, parse_tasks
from cua_tui.labs import LABS

# The complete example moved from the README to the manual's page (the tests below still say README).
README = Path(__file__).resolve().parents[1] / "docs" / "files" / "tasks.md"
LAB_NAMES = tuple(LABS)
AGENTS = tuple(vendor.spec for vendor in VENDORS.values())  # as `cua-tui fleet` gives them


def error_of(text: str, labs: tuple[str, ...] | None = LAB_NAMES) -> str:
    with pytest.raises(TasksError) as info:
        parse_tasks(text, "suite.toml", labs=labs, agents=AGENTS)
    return str(info.value)


def test_a_valid_file_gives_its_tasks_in_order() -> None:
    tasks = parse_tasks(
        'version = 1\nname = "s"\n\n[[tasks]]\nname = "one"\nlab = "form"\nmax_turns = 5\n\n'
        '[[tasks]]\ntask = "open the page"\nurl = "https://example.com/"\n'
        'allow_domains = ["example.com", "example.com"]\n',
        "suite.toml",
        labs=LAB_NAMES,
    )
    one, two = tasks.tasks
    assert (one.name, one.lab, one.max_turns, one.task, one.line) == ("one", "form", 5, "", 4)
    assert (two.name, two.url, two.allow_domains, two.line) == ("task-2", "https://example.com/", ("example.com",), 9)
    assert tasks.name == "s" and len(tasks.sha256) == 64


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[tasks]]\nname = "a"\nlab = "frm"\n', "line 3: tasks.0.lab: unknown lab 'frm'; known: form, injection"),
        ('[[tasks]]\ntask = "x"\n\n[[tasks]]\ntask = "y"\nbogus = 1\n', "line 6: tasks.1.bogus: unknown key 'bogus'"),
        ('version = 1\nnmae = "typo"\n[[tasks]]\ntask = "x"\n', "line 2: nmae: unknown key 'nmae'"),
        ('[[tasks]]\ntask = "x"\nmax_turns = nan\n', "line 3: tasks.0.max_turns: Expected `int | null`, got `float`"),
        ('[[tasks]]\ntask = "x"\ndeadline_seconds = inf\n', "line 3: tasks.0.deadline_seconds: Expected `int | null`"),
        ('[[tasks]]\ntask = "x"\nmax_steps = 0\n', "line 3: tasks.0.max_steps: max_steps must be between 1 and"),
        ('[[tasks]]\ntask = "x"\nmax_steps = 10000000000\n', "line 3: tasks.0.max_steps: max_steps must be between"),
        ('[[tasks]]\ntask = "x"\nmax_turns = true\n', "line 3: tasks.0.max_turns: Expected `int | null`, got `bool`"),
        ('[[tasks]]\nname = "a"\ntask = "x"\n[[tasks]]\nname = "a"\ntask = "y"\n', "line 5: tasks.1.name: name 'a' is"),
        ('[[tasks]]\nname = "../etc"\ntask = "x"\n', "line 2: tasks.0.name: '../etc': 1 to 64 letters"),
        ('[[tasks]]\nlab = "form"\nurl = "https://a.example/"\n', "line 3: tasks.0.url: give lab or url, not both"),
        ('[[tasks]]\ntask = "x"\nurl = "file:///etc/passwd"\n', "line 3: tasks.0.url: 'file:///etc/passwd': an http"),
        ('[[tasks]]\nurl = "https://a.example/"\n', "line 1: tasks.0.task: a task needs its text"),
        ('[[tasks]]\ntask = "x"\nagent = "gpt"\n', f"line 3: tasks.0.agent: 'gpt': {specs()}"),
        ('[[tasks]]\ntask = "x"\nallow_domains = ["ok.example", "127.1"]\n', "line 3: tasks.0.allow_domains: '127.1'"),
        ('[[tasks]]\ntask = "x"\nmodel = ""\n', "line 3: tasks.0.model: must not be empty"),
        ("version = 2\n[[tasks]]\ntask = 'x'\n", "line 1: version: unsupported version 2 (expected 1)"),
        ('name = "nothing to do"\n', "at top level: no tasks: add at least one [[tasks]] table"),
        ("tasks = 3\n", "line 1: tasks: Expected `array`, got `int`"),
        ('[[tasks]]\ntask = "x"\nlab = 3\n', "line 3: tasks.0.lab: Expected `str | null`, got `int`"),
        ('[[tasks]]\ntask = "unterminated\n', "line 2, column"),
    ],
)
def test_every_problem_names_its_line(text: str, message: str) -> None:
    error = error_of(text)
    assert error.startswith("tasks file suite.toml"), error
    assert message in error, error


def test_hostile_files_are_refused_quickly_and_boundedly(tmp_path: Path) -> None:
    started = time.monotonic()
    assert "too large" in error_of("#" * (MAX_TASKS_BYTES + 1))
    deep = "x = " + "[" * 5000 + "]" * 5000 + "\n"
    assert "nested more than 32 levels deep" in error_of(deep)
    dotted = "a" + ".a" * 20000 + " = 1\n"
    assert error_of(dotted).startswith("tasks file suite.toml, line 1: nested more than 32 levels")
    many = '[[tasks]]\ntask = "x"\n' * (MAX_TASKS + 1)
    assert f"more than {MAX_TASKS} tasks" in error_of(many)
    long_text = '[[tasks]]\ntask = "' + "x" * 9000 + '"\n'
    assert "task text of 9000 characters exceeds" in error_of(long_text)
    escape = '[[tasks]]\nname = "a"\nlab = "\\u001b[2Jfrm"\n'
    assert "\x1b" not in error_of(escape) and "\\x1b[2Jfrm" in error_of(escape)
    assert time.monotonic() - started < 5
    # Files: a FIFO is refused without blocking, a huge file without reading it, bytes must be UTF-8.
    fifo = tmp_path / "tasks.fifo"
    os.mkfifo(fifo)
    with pytest.raises(TasksError, match="not a regular file"):
        load_tasks(fifo)
    huge = tmp_path / "huge.toml"
    with open(huge, "wb") as fh:
        fh.truncate(MAX_TASKS_BYTES * 50)
    with pytest.raises(TasksError, match="too large"):
        load_tasks(huge)
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[[tasks]]\ntask = "caf\xe9"\n')
    with pytest.raises(TasksError, match="not UTF-8"):
        load_tasks(latin)
    with pytest.raises(TasksError, match="cannot read it"):
        load_tasks(tmp_path / "missing.toml")


def test_paths_are_relative_to_the_file_and_its_hash_is_of_its_bytes(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "suite" / "tasks.toml"
    path.parent.mkdir()
    path.write_text('[[tasks]]\ntask = "x"\nagent = "script:run.json"\npolicy = "/abs/p.toml"\n')
    tasks = load_tasks(path, labs=LAB_NAMES)
    assert tasks.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert tasks.path_of("run.json") == str(path.parent / "run.json")
    assert tasks.path_of("/abs/p.toml") == "/abs/p.toml"


# ---------------------------------------------------------------------------------------------------
# The README's example
# ---------------------------------------------------------------------------------------------------
def readme_tasks_example() -> str:
    text = README.read_text(encoding="utf-8")
    heading = re.search(r"^#+ .*[Ff]leet.*$", text, re.MULTILINE)
    assert heading, "README.md has no heading about the fleet"
    block = re.compile(r"^```toml\n(.*?)^```", re.MULTILINE | re.DOTALL).search(text, heading.end())
    assert block, "no ```toml block after the README's fleet heading"
    return block.group(1)


def test_the_readme_example_parses_and_uses_every_key() -> None:
    example = readme_tasks_example()
    tasks = parse_tasks(example, "README.md", labs=LAB_NAMES)
    assert len(tasks.tasks) >= 3
    keys = {"name", "task", "lab", "url", "agent", "model", "policy", "max_turns", "max_steps", "deadline_seconds",
            "allow_domains"}  # fmt: skip
    used = {key for key in keys if re.search(rf"^{key} = ", example, re.MULTILINE)}
    assert used == keys, f"the README example does not show {sorted(keys - used)}"
    assert any(t.lab for t in tasks.tasks) and any(t.url for t in tasks.tasks)


# ---------------------------------------------------------------------------------------------------
# Issue 35, point 5: a lab on a desktop that cannot host one is refused at submit
# ---------------------------------------------------------------------------------------------------
def test_the_backends_that_host_a_lab_come_from_the_registry() -> None:
    from cua_tui.desktops import BACKENDS, lab_hosts

    assert set(lab_hosts()) < set(BACKENDS) and {"local", "cwsandbox", "docker"} <= set(lab_hosts())
    assert {"sim", "dry"} <= set(BACKENDS) - set(lab_hosts())  # no browser: nothing to open a page in


@pytest.mark.parametrize("backend", ["sim", "dry"])
@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('lab = "form"', "line 5: tasks.1.lab: lab 'form' needs a desktop with a browser"),
        ('task = "t"\nurl = "https://a.example/"', "line 6: tasks.1.url: a URL needs a desktop with a browser"),
    ],
)
def test_a_lab_or_url_on_a_backend_without_a_browser_is_refused_naming_those_with_one(
    backend: str, table: str, said: str
) -> None:
    from cua_tui.desktops import lab_hosts

    hosts = lab_hosts()
    text = f'[[tasks]]\ntask = "fill"\n\n[[tasks]]\n{table}\n'
    with pytest.raises(TasksError) as info:
        parse_tasks(text, "suite.toml", labs=LAB_NAMES, backend=(backend, hosts))
    message = str(info.value)
    assert said in message and "\n" not in message
    assert message.endswith(f": --backend local, cwsandbox or docker, not {backend}")
    for host in hosts:
        assert parse_tasks(text, "suite.toml", labs=LAB_NAMES, backend=(host, hosts)).tasks[1].name == "task-2"


# ---------------------------------------------------------------------------------------------------
# The queue's order
# ---------------------------------------------------------------------------------------------------
def request(kind: str = "action", index: int = 0, run: str = "r1") -> DecisionRequest:
    if kind == "safety_check":
        checks = (SafetyCheck("sc", "malicious_instructions", "odd"),)
        return DecisionRequest(
            run, 1, index, "c", "safety_check", "the model raised safety checks", safety_checks=checks
        )
    return DecisionRequest(run, 1, index, "c", "action", "why", action=Action(Kind.CLICK, point=(1, 1)))


@pytest.mark.parametrize(
    ("kind", "rule", "tier", "label"),
    [
        ("safety_check", "", Tier.SAFETY_CHECK, "safety check"),
        ("action", "regions.send", Tier.RISKY, "region"),
        ("action", "actions.type", Tier.RISKY, "transmission"),
        ("action", "keys.confirm:Return", Tier.RISKY, "transmission"),
        ("action", "keys.confirm:ctrl+Return", Tier.RISKY, "transmission"),
        ("action", "keys.confirm:ctrl+s", Tier.OTHER, "other"),
        ("action", "actions.drag", Tier.OTHER, "other"),
        ("action", "", Tier.OTHER, "other"),
    ],
)
def test_priority_names_the_tier_and_the_rule(kind: str, rule: str, tier: Tier, label: str) -> None:
    got = priority(request(kind), rule)
    assert (got.tier, got.label) == (tier, label)
    assert got.rule == ("safety_check" if kind == "safety_check" else rule or "?")
    assert got.why


def test_the_queue_orders_by_risk_then_age_and_removes_only_the_same_item() -> None:
    queue = ApprovalQueue()

    def item(ticket: int, kind: str, rule: str, asked: float, run: str = "r1") -> QueueItem:
        req = request(kind, ticket, run)
        return QueueItem(ticket, f"t{ticket}", run, req, priority(req, rule), asked, ticket)

    old_other = item(1, "action", "keys.confirm:ctrl+s", 1.0)
    new_safety = item(2, "safety_check", "", 9.0)
    region = item(3, "action", "regions.send", 5.0, run="r2")
    typing = item(4, "action", "actions.type", 4.0, run="r2")
    tie = item(5, "action", "actions.type", 4.0)
    for it in (old_other, new_safety, region, typing, tie):
        queue.add(it)
    assert [i.ticket for i in queue.items()] == [2, 4, 5, 3, 1]
    with pytest.raises(ValueError):
        queue.add(typing)
    assert queue.find("r2", 1, 3, "action") is region and queue.find("r1", 1, 3, "action") is None
    assert [i.ticket for i in queue.of_run("r2")] == [3, 4]
    twin = QueueItem(4, "t4", "r2", typing.request, typing.priority, typing.asked_at, 4)  # equal, not the same
    assert twin not in queue and not queue.remove(twin)
    assert queue.remove(typing) and not queue.remove(typing)
    assert len(queue) == 4 and typing.waited(10.0) == 6.0
