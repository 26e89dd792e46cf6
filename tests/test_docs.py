"""The README and the manual: the manual builds with ``mkdocs build --strict``, and every ``cua-tui`` command
they show parses with the real command line."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from lanes import BESIDE_S

from cua_tui.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250
DOCSTRING_MAX_LINES = 12
# The lead rewrites the TUI in the same issue; its modules' docstrings are checked once that lands.
DOCSTRING_EXEMPT: tuple[str, ...] = ()

# A fenced block, possibly indented inside a list item: its language and its body.
FENCE = re.compile(
    r"^(?P<indent>[ ]*)(?P<fence>```+|~~~+)(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=fence)[ ]*$",
    re.MULTILINE | re.DOTALL,
)
SHELL_LANGS = {"", "sh", "bash", "shell", "console", "text"}
INLINE = re.compile(r"`(cua-tui [^`]+)`")
# A command starts its line (after a `$ ` prompt), or follows a label as in a run's "next:" lines.
COMMAND_START = re.compile(r"^(?:\$ )?(?:[\w ]+:\s+)?(?=cua-tui\s)")
OPTION = re.compile(r"^\[*(-{1,2}[a-zA-Z][\w-]*)")


@dataclass(frozen=True)
class Shown:
    """A ``cua-tui`` command line shown in a page: an example to parse, or a synopsis of its options."""

    page: str
    line: int
    text: str
    synopsis: bool


def doc_pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def commands_in(text: str, page: str) -> Iterator[Shown]:
    """Every ``cua-tui`` command line of a page: those of its fenced shell blocks, and its inline code."""
    for block in FENCE.finditer(text):
        if block["lang"] not in SHELL_LANGS:
            continue
        first = text.count("\n", 0, block.start("body")) + 1
        lines = [line.strip() for line in block["body"].splitlines()]
        i = 0
        while i < len(lines):
            start = COMMAND_START.match(lines[i])
            if start is None:
                i += 1
                continue
            number, command = first + i, lines[i][start.end() :]
            # a backslash continues a command; a synopsis continues on lines that open with `[`
            while i + 1 < len(lines) and (command.endswith("\\") or lines[i + 1].startswith("[")):
                i += 1
                command = command.removesuffix("\\") + " " + lines[i]
            yield Shown(page, number, command, synopsis=is_synopsis(command))
            i += 1
    for found in INLINE.finditer(text):
        yield Shown(page, text.count("\n", 0, found.start()) + 1, found[1], synopsis=True)


def is_synopsis(command: str) -> bool:
    """A usage line (``[--flag VALUE]``, ``a|b``) rather than a command to run."""
    return "[" in command or "|" in command.split("#")[0]


def words(command: str) -> list[str]:
    """The arguments after ``cua-tui``, as the shell would pass them: comments dropped, and nothing from the
    first redirection, pipe or list operator on (``> file``, ``| less``, ``&& ...``)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    argv = []
    for token in lexer:
        if token and set(token) <= set(lexer.punctuation_chars):
            break
        argv.append(token)
    assert argv and argv[0] == "cua-tui", command
    return argv[1:]


def dry_parse(argv: list[str]) -> None:
    """Parse a command line with the real click command tree, without running the command: an unknown
    command or option, a bad choice, a value out of range or a missing required option raises."""
    with click.Context(main, info_name="cua-tui") as root:
        name, command, rest = main.resolve_command(root, argv)
        assert command is not None and name is not None
        with command.make_context(name, rest, parent=root):
            pass


def check_synopsis(command: str) -> None:
    """A synopsis names a real command, and every option it shows is one of that command's; where an
    option has a fixed set of values, every value shown is one of them."""
    argv = [token.strip("[]") for token in command.replace("|", " | ").split() if token.strip("[]")]
    assert argv[0] == "cua-tui", command
    with click.Context(main, info_name="cua-tui") as root:
        _, sub, _ = main.resolve_command(root, argv[1:2])
    assert sub is not None
    params = {opt: param for param in sub.get_params(root) for opt in (*param.opts, *param.secondary_opts)}
    tokens = command.split()
    for index, token in enumerate(tokens[2:], start=2):
        found = OPTION.match(token)
        if found is None:
            continue
        option = found[1]
        if option not in params:
            raise click.NoSuchOption(option, ctx=root)
        param = params[option]
        if isinstance(param.type, click.Choice) and index + 1 < len(tokens):
            shown = tokens[index + 1].strip("[]")
            if "|" in shown:
                values = [value for value in shown.split("|") if value]
                unknown = [value for value in values if value not in param.type.choices]
                assert not unknown, f"{option}: {unknown} not among {list(param.type.choices)}"


def check(shown: Shown) -> None:
    if shown.synopsis:
        check_synopsis(shown.text)
    else:
        dry_parse(words(shown.text))


def all_shown() -> list[Shown]:
    return [shown for page in doc_pages() for shown in commands_in(page.read_text(encoding="utf-8"), rel(page))]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ---------------------------------------------------------------------------------------------------
# The manual builds, every link and anchor resolving
# ---------------------------------------------------------------------------------------------------
@pytest.mark.beside  # static: on the CPU the other parts leave
def test_the_manual_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=BESIDE_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # every page of docs/ is in the navigation (an omitted file is a warning, so strict fails) and built
    for page in DOCS.rglob("*.md"):
        relative = page.relative_to(DOCS).with_suffix("")
        built = site / (relative.parent if relative.name == "index" else relative) / "index.html"
        assert built.is_file(), f"{page} was not built"


def test_a_broken_link_fails_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The manual's own configuration (theme, extensions, validation) on two pages, one linking to an anchor
    # the other does not have; built in this process, as `mkdocs build --strict` builds.
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[the other page](other.md#nowhere)\n")
    (docs / "other.md").write_text("# Other\n")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = config[: config.index("\nnav:")] + "\nnav:\n  - index.md\n  - other.md\n"
    (tmp_path / "mkdocs.yml").write_text(config)
    loaded = load_config(str(tmp_path / "mkdocs.yml"), site_dir=str(tmp_path / "site"))
    assert loaded.strict
    with pytest.raises(Abort, match=r"1 warnings? in strict mode"):
        build(loaded)
    assert "does not contain an anchor '#nowhere'" in caplog.text


# ---------------------------------------------------------------------------------------------------
# Every command shown parses with the real command line
# ---------------------------------------------------------------------------------------------------
def test_every_command_shown_parses() -> None:
    shown = all_shown()
    # the extraction itself must find the pages' commands, or this test would pass on nothing
    examples = [s for s in shown if not s.synopsis]
    assert len(examples) >= 40 and len(shown) >= 100, (len(examples), len(shown))
    assert {s.page for s in examples} >= {"README.md", "docs/commands/run.md", "docs/backends/docker.md"}
    failures = []
    for item in shown:
        try:
            check(item)
        except (click.ClickException, AssertionError, ValueError) as exc:
            message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
            failures.append(f"{item.page}:{item.line}: {item.text}\n    {message}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("cua-tui run --lab form --no-such-flag", click.NoSuchOption),
        ("cua-tui frobnicate --lab form", click.UsageError),
        ("cua-tui run --backend nowhere --lab form", click.BadParameter),
        ("cua-tui run --max-turns 0 --lab form", click.BadParameter),
        ("cua-tui fleet --backend sim", click.MissingParameter),
        ("cua-tui verify", click.MissingParameter),
        ("cua-tui export RUN --pdf out.pdf", click.NoSuchOption),
    ],
)
def test_a_wrong_command_line_fails(line: str, error: type[Exception]) -> None:
    page = f"Try it:\n\n```sh\n{line}\n```\n"
    (shown,) = commands_in(page, "wrong.md")
    assert not shown.synopsis
    with pytest.raises(error):
        check(shown)


@pytest.mark.parametrize(
    "line",
    [
        "cua-tui run [--lab NAME] [--no-such-flag]",
        "cua-tui runs [--status passed|gone]",
        "cua-tui sandboxes [--backend cwsandbox|kubernetes]",
        "cua-tui frobnicate [--all]",
    ],
)
def test_a_wrong_synopsis_fails(line: str) -> None:
    (shown,) = commands_in(f"```\n{line}\n```\n", "wrong.md")
    assert shown.synopsis
    with pytest.raises((click.UsageError, AssertionError)):
        check(shown)


def test_commands_are_found_where_pages_show_them() -> None:
    page = (
        "Run `cua-tui verify RUN --nope` to check.\n\n"
        "```\nnext:\n  check its log:     cua-tui verify 2026\n$ cua-tui runs --json\n"
        "┃   cua-tui verified   ┃\n```\n\n"
        "```toml\n# cua-tui run --nope\n```\n\n"
        "```sh\ncua-tui run --lab form \\\n  --headless\n"
        "cua-tui demo [--lab NAME]\n              [--headless]\n```\n"
    )
    found = [(s.line, s.text, s.synopsis) for s in commands_in(page, "p.md")]
    assert found == [
        (5, "cua-tui verify 2026", False),
        (6, "cua-tui runs --json", False),
        (15, "cua-tui run --lab form  --headless", False),
        (17, "cua-tui demo [--lab NAME] [--headless]", True),
        (1, "cua-tui verify RUN --nope", True),
    ]


# ---------------------------------------------------------------------------------------------------
# What the README and the manual hold
# ---------------------------------------------------------------------------------------------------
def test_the_readme_is_short_and_its_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 20
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing
    # the picture, the two set-up commands, and the way into the manual
    assert re.search(r"!\[[^]]+\]\(screenshots/[\w-]+\.png\)", text)
    assert "```sh\nbash scripts/setup.sh demo\n```" in text
    assert "```sh\nbash scripts/setup.sh test\n```" in text
    assert "(docs/index.md)" in text


def test_every_command_and_option_has_its_page() -> None:
    for name, command in main.commands.items():
        page = DOCS / "commands" / f"{name}.md"
        assert page.is_file(), f"no manual page for `cua-tui {name}`"
        text = page.read_text(encoding="utf-8")
        # a hidden option (one the tests use) is not the user's to know
        for param in command.params:
            for option in param.opts if isinstance(param, click.Option) and not param.hidden else ():
                if option.startswith("--"):
                    assert option in text, f"{page.name} does not mention {option}"


def test_module_docstrings_are_a_few_lines() -> None:
    # Design notes and measurements live in the manual; a module says what it is in a few lines.
    long = []
    for path in sorted((ROOT / "cua_tui").rglob("*.py")):
        name = rel(path)
        if name.startswith(DOCSTRING_EXEMPT):
            continue
        doc = module_docstring(path)
        if doc is not None and len(doc.strip().splitlines()) > DOCSTRING_MAX_LINES:
            long.append(f"{name}: {len(doc.strip().splitlines())} lines")
    assert not long, long


def test_a_long_module_docstring_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("#!/usr/bin/env python3\n# a comment\n\n" + '"""' + "line\n" * 13 + '"""' + "\nX = 1\n")
    doc = module_docstring(module)
    assert doc is not None and len(doc.strip().splitlines()) > DOCSTRING_MAX_LINES
    module.write_text('X = 1\n"""not a docstring"""\n')
    assert module_docstring(module) is None


def module_docstring(path: Path) -> str | None:
    """The module's docstring: its first statement when that is a string (read token by token, so only the
    head of the file is read)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING}
    with path.open("rb") as fh:
        for token in tokenize.tokenize(fh.readline):
            if token.type in skip:
                continue
            if token.type == tokenize.STRING:
                value = ast.literal_eval(token.string)
                return value if isinstance(value, str) else None
            return None
    return None
