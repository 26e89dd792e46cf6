"""The one strict TOML reader (cua_tui.core.tomlfile): bounded reads and messages that name the line."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from cua_tui.core import tomlfile
from cua_tui.core.tomlfile import TomlFileError


class _Server(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    host: str
    port: int = 80


class _Limits(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    turns: int = 1


class _File(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str = ""
    limits: _Limits = msgspec.field(default_factory=_Limits)
    servers: list[_Server] = msgspec.field(default_factory=list)


class _MineError(TomlFileError):
    pass


def problem(tmp_path: Path, text: str | bytes, cap: int = tomlfile.MAX_BYTES) -> str:
    path = tmp_path / "mine.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(TomlFileError) as info:
        tomlfile.load(path, "mine file m.toml", cap=cap).convert(_File)
    return str(info.value)


def test_a_good_file_converts_and_knows_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "good.toml"
    path.write_text('name = "x"\n\n[limits]\nturns = 3\n\n[[servers]]\nhost = "a"\n\n[[servers]]\nhost = "b"\n')
    doc = tomlfile.load(path, "mine file good.toml")
    parsed = doc.convert(_File)
    assert (parsed.name, parsed.limits.turns, [s.host for s in parsed.servers]) == ("x", 3, ["a", "b"])
    assert doc.lines_of([("servers", 0), ("servers", 1, "host"), ("limits", "turns"), ("nothing",)]) == {
        ("servers", 0): 6,
        ("servers", 1, "host"): 10,
        ("limits", "turns"): 4,
        ("nothing",): None,
    }
    # A path not in the file: the line of its longest prefix that is.
    assert doc.line_of(("servers", 1, "port")) == 9
    assert doc.message(("limits", "turns"), "too many") == "mine file good.toml, line 4: limits.turns: too many"


def test_a_syntax_error_names_its_line_and_column(tmp_path: Path) -> None:
    message = problem(tmp_path, 'name = "x"\n[limits]\nturns = = 3\n')
    assert message == "mine file m.toml, line 3, column 9: invalid TOML: Invalid value"
    # A document cut short: the last line.
    message = problem(tmp_path, 'name = "x"\ndescription = """never closed\n\n')
    assert message.startswith("mine file m.toml, line 3: invalid TOML at the end of the file: "), message


def test_an_unknown_key_names_its_line_and_path(tmp_path: Path) -> None:
    assert problem(tmp_path, 'name = "x"\nnmae = "y"\n') == "mine file m.toml, line 2: nmae: unknown key 'nmae'"
    message = problem(tmp_path, '[limits]\nturns = 2\n\n"odd key" = 1\n')
    assert message == "mine file m.toml, line 4: limits.odd key: unknown key 'odd key'"


def test_a_wrong_type_names_its_line(tmp_path: Path) -> None:
    message = problem(tmp_path, 'name = "x"\n\n[limits]\nturns = "many"\n')
    assert message == "mine file m.toml, line 4: limits.turns: Expected `int`, got `str`"


def test_a_nested_table_path_counts_arrays_of_tables(tmp_path: Path) -> None:
    text = '[[servers]]\nhost = "a"\n\n[[servers]]\nhost = "b"\nport = true\n'
    assert problem(tmp_path, text) == "mine file m.toml, line 6: servers.1.port: Expected `int`, got `bool`"
    text = '[[servers]]\nhost = "a"\n\n[[servers]]\nport = 8080\n'
    assert problem(tmp_path, text) == "mine file m.toml, line 4: servers.1: missing required key 'host'"
    text = 'servers = [{host = "a"}, {host = "b", colour = "red"}]\n'
    assert problem(tmp_path, text) == "mine file m.toml, line 1: servers.1.colour: unknown key 'colour'"


def test_an_oversized_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "huge.toml"
    with open(huge, "wb") as fh:
        fh.truncate(tomlfile.MAX_BYTES * 100)
    with pytest.raises(TomlFileError) as info:
        tomlfile.load(huge, "mine file huge.toml", what="a mine file")
    assert str(info.value) == f"mine file huge.toml: too large (a mine file is at most {tomlfile.MAX_BYTES} bytes)"
    small_cap = problem(tmp_path, "# " + "x" * 200 + "\n", cap=100)
    assert small_cap == "mine file m.toml: too large (a file is at most 100 bytes)"
    with pytest.raises(TomlFileError, match=r"^mine: too large \(over 100 characters\)$"):
        tomlfile.parse("#" * 101, "mine", cap=100)


def test_a_file_that_is_not_utf8_names_the_line_of_the_bad_byte(tmp_path: Path) -> None:
    message = problem(tmp_path, b'name = "x"\n# caf\xe9\n')
    assert message == "mine file m.toml, line 2: not UTF-8 text (byte 16)"


def test_a_missing_file_and_a_fifo_are_refused(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    with pytest.raises(TomlFileError) as info:
        tomlfile.load(missing, f"mine file {missing}")
    assert str(info.value) == f"mine file {missing}: cannot read it (No such file or directory)"
    fifo = tmp_path / "mine.fifo"
    os.mkfifo(fifo)
    with pytest.raises(TomlFileError, match="not a regular file"):
        tomlfile.load(fifo, "mine file mine.fifo")


def test_nesting_is_bounded_and_located(tmp_path: Path) -> None:
    deep = "x = " + "[" * 5000 + "]" * 5000 + "\n"
    message = problem(tmp_path, deep)
    assert message == "mine file m.toml, line 1: nested more than 32 levels deep (arrays, tables or dotted keys)"
    dotted = 'name = "x"\n' + "a" + ".a" * 20000 + " = 1\n"
    assert problem(tmp_path, dotted).startswith("mine file m.toml, line 2: nested more than 32 levels")


def test_errors_are_of_the_callers_type_and_show_no_escape(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('"\\u001b[2Jevil" = 1\n')
    doc = tomlfile.load(path, "mine file m.toml", error=_MineError)
    with pytest.raises(_MineError) as info:
        doc.convert(_File)
    assert "\x1b" not in str(info.value) and "\\x1b[2Jevil" in str(info.value)
    assert isinstance(doc.error(("name",), "bad"), _MineError)
    with pytest.raises(_MineError, match="cannot read it"):
        tomlfile.load(tmp_path / "gone.toml", "mine file gone.toml", error=_MineError)


def test_the_settings_and_theme_files_are_read_by_it_bounded(tmp_path: Path) -> None:
    """The settings file and a themes folder were read whole before: now capped, and a FIFO never blocks."""
    from cua_tui.config import MAX_SETTINGS_BYTES, ConfigError, Settings
    from cua_tui.tui.themes import load_themes

    config = tmp_path / "config.toml"
    config.write_text("bell = true\n\nmodel_retries = 99\n")
    with pytest.raises(ConfigError) as info:
        Settings.load({"CUA_TUI_CONFIG": str(config)})
    assert str(info.value) == f"settings file {config}, line 3: model_retries: must be between 0 and 10"
    config.write_text("#" * (MAX_SETTINGS_BYTES + 1))
    with pytest.raises(ConfigError, match="too large"):
        Settings.load({"CUA_TUI_CONFIG": str(config)})
    themes = tmp_path / "themes"
    themes.mkdir()
    os.mkfifo(themes / "pipe.toml")
    (themes / "wide.toml").write_text('name = "wide"\nprimary = "#123456"\n' + "#" * 100_000 + "\n")
    _themes, problems = load_themes(themes)
    assert problems == [
        "theme file pipe.toml: cannot read it (not a regular file)",
        "theme file wide.toml: too large (a theme file is at most 65536 bytes)",
    ]
