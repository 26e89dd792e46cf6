"""Attention (issue 11, point 5): alerts that stay until seen, routine browser noise folded into a count,
the headless lines that name their action, the notification escapes and their settings."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cua_tui.config import Settings
from cua_tui.core import events as ev
from cua_tui.core.attention import BROWSER_BACKGROUND_HOSTS, Attention, routine_egress
from cua_tui.core.policy import Verdict
from cua_tui.core.values import OutcomeStatus
from cua_tui.headless import printer
from cua_tui.tui.signals import notification_escape, notification_protocol


def stamped(events: list[ev.Event]) -> list[ev.Stamped]:
    return [ev.Stamped(i, f"{i:064x}", e) for i, e in enumerate(events)]


def egress(host: str, port: int = 443, method: str = "CONNECT", allowed: bool = False) -> ev.Egress:
    return ev.Egress(host=host, port=port, method=method, allowed=allowed, reason="" if allowed else "not allowed")


def test_routine_means_exact_browser_hosts_never_a_suffix() -> None:
    assert routine_egress(egress("update.googleapis.com"))
    assert routine_egress(egress("CLIENTS2.GOOGLE.COM."))  # case and a trailing dot do not matter
    # A page's choice of a Google-looking host is not the browser's own traffic: it must alert.
    for host in ("storage.googleapis.com", "evil.update.googleapis.com", "update.googleapis.com.evil.example"):
        assert not routine_egress(egress(host)), host
    assert not routine_egress(egress("update.googleapis.com", allowed=True))  # allowed is not refused
    assert all(h == h.lower() and "." in h for h in BROWSER_BACKGROUND_HOSTS)


def test_alerts_for_what_matters_and_folding_for_the_rest() -> None:
    attention = Attention()
    events: list[ev.Event] = [
        egress("clients2.google.com", 80, "GET"),
        egress("update.googleapis.com"),
        egress("update.googleapis.com"),
        ev.ModelTurn(turn=1, text="hi", calls=1, actions=2),
        ev.ActionProposed(turn=1, index=0, call_id="c", action=None, summary="press ctrl+alt+delete"),
        ev.PolicyVerdict(turn=1, index=0, verdict=Verdict.BLOCK, reason="a blocked chord", rule="keys"),
        ev.ActionProposed(turn=1, index=1, call_id="c", action=None, summary="click at (1, 2)"),
        ev.PolicyVerdict(turn=1, index=1, verdict=Verdict.CONFIRM, reason="submits", rule="regions"),
        egress("collector.evil.example", 443, "POST"),
        egress("collector.evil.example", 443, "POST"),  # the browser retries: one alert per host and port
        ev.SafetyChecksRaised(turn=1, call_id="c", checks=[{"code": "malicious_instructions", "message": "m"}]),
        ev.VerificationDone(verifier="lab:x", passed=False, detail="nothing received \x1b[2J"),
    ]
    alerts = [a for a in map(attention.apply, stamped(events)) if a is not None]
    assert [a.seq for a in alerts] == [5, 8, 10, 11]
    assert alerts[0].line == "#1 press ctrl+alt+delete BLOCKED: a blocked chord"
    assert alerts[1].line == "egress refused: POST collector.evil.example:443 (not allowed)"
    assert "malicious_instructions" in alerts[2].line
    assert "verification FAILED" in alerts[3].line and "\x1b" not in alerts[3].line
    assert attention.folded == 3 and attention.folded_hosts == ["clients2.google.com", "update.googleapis.com"]
    hosts = "clients2.google.com, update.googleapis.com"
    assert attention.folded_line() == f"3 routine refused requests of the browser ({hosts})"
    assert len(attention.unseen) == 4 and attention.seen() == 4 and attention.unseen == []


def test_a_flood_of_hosts_keeps_a_bounded_number_of_alerts() -> None:
    attention = Attention()
    for s in stamped([egress(f"h{i}.evil.example") for i in range(5000)]):
        attention.apply(s)
    assert len(attention.unseen) == Attention.MAX_UNSEEN
    assert attention.unseen[-1].line.startswith("egress refused: CONNECT h4999.evil.example")


def test_headless_lines_name_the_action_mark_alerts_and_fold_routine_egress() -> None:
    out = io.StringIO()
    listen = printer(out)
    events: list[ev.Event] = [
        egress("clients2.google.com", 80, "GET"),
        egress("update.googleapis.com"),
        ev.ModelTurn(turn=1, text="two clicks", calls=1, actions=2),
        ev.ActionProposed(turn=1, index=0, call_id="c", action=None, summary="click at (550, 182)"),
        ev.Outcome(turn=1, index=0, call_id="c", status=OutcomeStatus.EXECUTED, message="OK", step=1),
        ev.ActionProposed(turn=1, index=1, call_id="c", action=None, summary="press ctrl+alt+delete"),
        ev.PolicyVerdict(turn=1, index=1, verdict=Verdict.BLOCK, reason="blocked chord", rule="keys"),
        egress("exfil.example", 443, "POST"),
        ev.RunEnded(status=ev.RunStatus.FAILED, reason="r", turns=1, steps=1, executed=1),
    ]
    for s in stamped(events):
        listen(s)
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "  egress refused: GET clients2.google.com:80 (the browser's own background traffic: further ones are counted)"
    )
    assert not any("update.googleapis.com:443" in line for line in lines)  # folded, not printed
    assert "  #1 click at (550, 182): executed" in lines
    assert "! #2 press ctrl+alt+delete: BLOCK: blocked chord" in lines
    assert "! egress refused: POST exfil.example:443 (not allowed)" in lines
    assert "  2 routine refused requests of the browser (clients2.google.com, update.googleapis.com) folded" in lines
    assert lines[-1].startswith("run ended: failed")


@pytest.mark.parametrize(
    ("env", "protocol"),
    [
        ({"TERM": "xterm-kitty"}, "99"),
        ({"TERM_PROGRAM": "iTerm.app"}, "9"),
        ({"TERM_PROGRAM": "WezTerm"}, "9"),
        ({"TERM": "foot"}, "777"),
        ({"TERM": "xterm-256color", "VTE_VERSION": "7600"}, "777"),
        ({"TERM": "xterm-256color"}, None),  # an unknown terminal could print the sequence: nothing is sent
        ({"TERM": "screen", "TMUX": "/tmp/x"}, None),
    ],
)
def test_the_notification_escape_only_for_terminals_known_to_show_it(env: dict[str, str], protocol: str | None) -> None:
    assert notification_protocol(env) == protocol
    assert (notification_escape("t", "b", env) is None) == (protocol is None)


def test_the_notification_body_cannot_end_the_sequence_or_start_another() -> None:
    hostile = "click at (1, 2) \x07\x1b]0;owned\x1b\\ \x9b2J;"
    for env in ({"TERM": "xterm-kitty"}, {"TERM_PROGRAM": "WezTerm"}, {"TERM": "foot"}):
        sequence = notification_escape("cua-tui: decision needed", hostile, env)
        assert sequence is not None
        body = sequence.split(";", 2 if env.get("TERM") != "foot" else 3)[-1]
        assert "owned" in body and "\x9b" not in sequence
        # exactly the protocol's own terminators, none from the text
        assert sequence.count("\x07") + sequence.count("\x1b\\") == (2 if env.get("TERM") == "xterm-kitty" else 1)
    wrapped = notification_escape("t", "b", {"TERM_PROGRAM": "WezTerm", "TMUX": "/tmp/s"})
    assert wrapped == "\x1bPtmux;\x1b\x1b]9;t: b\x07\x1b\\"


def test_bell_and_notify_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    base = {"CUA_TUI_CONFIG": str(config)}
    assert (Settings.load(base).bell, Settings.load(base).notify) == (True, True)
    config.write_text("bell = false\nnotify = false\n")
    assert (Settings.load(base).bell, Settings.load(base).notify) == (False, False)
    assert Settings.load({**base, "CUA_TUI_BELL": "1"}).bell is True  # the environment wins
    config.write_text("")
    assert Settings.load({**base, "CUA_TUI_NOTIFY": "off", "CUA_TUI_BELL": "no"}).notify is False
    config.write_text('bell = "loud"\n')
    with pytest.raises(ValueError, match="bell"):
        Settings.load(base)
