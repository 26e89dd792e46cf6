"""A run as one self-contained HTML file: what a reviewer needs, readable offline in any browser. Inert: no
script, a strict Content-Security-Policy, every string from the run directory made visible and escaped.
docs/commands/export.md, "HTML report".
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..core import describe, ending
from ..core import events as ev
from ..core.audit import VerifyExit
from ..core.hand import Hand, hand, typed
from ..core.text import truncate, visible_parts
from ..core.timeline import Step, screens
from .marks import Marker, marker_of
from .source import Run, key

# steps drawn in full; a longer run lists the rest as a count
MAX_STEPS = 2_000
# screenshot bytes embedded (base64 makes the file about 4/3 of it)
MAX_EMBEDDED = 48 * (1 << 20)
TEXT_LIMIT = 2_000  # characters of one message, reason or model text
# every frame's border (the Chromium test finds frames by it)
FRAME_BORDER = "#5a2d82"


def e(value: Any, limit: int = TEXT_LIMIT, *, lines: bool = False) -> str:
    """Untrusted text for HTML: made visible, cut to ``limit``, then escaped (quotes too); each stand-in for
    a hidden character in a ``<mark class="esc">``, drawn reversed, so a real U+200B is not the text ``\\u200b``."""
    text = value if isinstance(value, str) else str(value)
    return "".join(
        f'<mark class="esc">{html.escape(part)}</mark>' if escaped else html.escape(part)
        for part, escaped in visible_parts(text, limit=limit, keep_newlines=lines)
    )


def unmarked(escaped: str) -> str:
    """``e``'s output for an attribute's value: the marks dropped (escaped text holds no ``<``, so every tag
    in it is a mark), the stand-ins kept."""
    return escaped.replace('<mark class="esc">', "").replace("</mark>", "")


_BASE_CSS = """
:root{color-scheme:light;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--ok:#1a7f37;--warn:#9a6700;--bad:#cf222e}
body{font:14px/1.45 system-ui,sans-serif;color:var(--fg);background:#fff;margin:0 auto;max-width:1040px;padding:16px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:0 0 6px}code,.mono{font-family:ui-monospace,monospace;font-size:12.5px;overflow-wrap:anywhere}
.verdict{border:2px solid var(--line);padding:10px 14px;border-radius:6px;margin:10px 0}
.verdict.good{border-color:var(--ok);background:#dafbe1}.verdict.bad{border-color:var(--bad);background:#ffebe9}
.verdict.claim{border-color:var(--warn);background:#fff8c5}
.verdict p{margin:4px 0}.verdict strong{font-size:16px}.verdict .status strong{font-size:20px}
.tone-good{color:var(--ok)}.tone-bad{color:var(--bad)}.tone-claim{color:var(--warn)}
.record-tampered strong,.record-unusable strong{color:var(--bad)}.record-unsealed strong{color:var(--warn)}
.note{color:var(--muted)}
mark.esc{background:var(--fg);color:#fff;padding:0 1px;border-radius:2px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}dt{color:var(--muted)}dd{margin:0}
.pre{white-space:pre-wrap;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;font-size:13px}td,th{border-bottom:1px solid var(--line);padding:3px 6px;
text-align:left;vertical-align:top}
.step{border:1px solid var(--line);border-radius:6px;padding:10px 12px;margin:12px 0}
.step.flag-refusal,.step.flag-error{border-left:5px solid var(--bad)}
.step.flag-decision{border-left:5px solid var(--warn)}
.step.flag-takeover{border-left:5px solid #8250df;background:#fbefff}
.step.edited{border-left:5px solid var(--warn)}.badge.edited{border-color:var(--warn);color:var(--warn);font-weight:600}
tr.edited td:nth-child(3){background:#fff8c5}.proposed{color:var(--muted)}
tbody.takeover td{background:#fbefff}tbody.takeover tr.stretch th{background:#8250df;color:#fff;font-weight:600}
tbody.takeover td:first-child{border-left:5px solid #8250df}
.how{display:inline-block;border-radius:3px;padding:0 4px;font-size:12px;background:#eaeef2}
.how-group,.how-deadline,.how-budget,.how-takeover{background:#8250df;color:#fff}
.v-allow{color:var(--ok)}.v-confirm{color:var(--warn);font-weight:600}.v-block{color:var(--bad);font-weight:600}
.o-executed{color:var(--ok)}
.o-declined,.o-refused,.o-failed,.o-stale,.o-not_executed{color:var(--bad);font-weight:600}
.badge{display:inline-block;border:1px solid var(--line);border-radius:10px;padding:0 7px;margin-left:4px;
font-size:12px}
.frames{display:flex;flex-wrap:wrap;gap:12px;margin-top:8px}
.frame{margin:0;width:480px;max-width:100%}.frame figcaption{color:var(--muted);font-size:12px}
.shot{position:relative;width:100%;box-sizing:border-box;border:2px solid FRAME_BORDER;background-size:100% 100%;
background-repeat:no-repeat}
.shot svg{position:absolute;left:0;top:0;width:100%;height:100%}
.shot.missing{aspect-ratio:4/3;background:#f6f8fa;color:var(--bad);padding:12px;font-size:12px}
.mk{fill:none;stroke-width:4;vector-effect:non-scaling-stroke}.mk-allow{stroke:#d100d1}.mk-confirm{stroke:#e8a600}
.mk-block{stroke:#e00000}.mk-dot{stroke:none}.mk-dot.mk-allow{fill:#d100d1}.mk-dot.mk-confirm{fill:#e8a600}
.mk-dot.mk-block{fill:#e00000}.after .mk{stroke-dasharray:6 4}
.frame.private .shot{border-style:dashed;border-width:4px}.frame.private figcaption{color:var(--bad);font-weight:600}
""".replace("FRAME_BORDER", FRAME_BORDER)


class _Page:
    """The document being written, and the screens it embeds (each once)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.classes: dict[str, str] = {}  # sha256 -> the CSS rule of its picture
        self.embedded = 0
        self.out: list[str] = []

    def add(self, *parts: str) -> None:
        self.out.extend(parts)

    def shot_class(self, sha: str) -> tuple[str, str, int, int]:
        """(CSS class, why there is no picture, width, height) for a screen, embedding it on first use."""
        screen = self.run.screen(sha)
        name = f"s-{sha[:20]}"
        if sha in self.classes:
            return name, "", screen.width, screen.height
        if screen.png is None:
            return "", screen.refused, screen.width, screen.height
        if self.embedded + len(screen.png) > MAX_EMBEDDED:
            return "", f"not embedded: the file's {MAX_EMBEDDED >> 20} MiB of screenshots are used up", 0, 0
        self.embedded += len(screen.png)
        data = base64.b64encode(screen.png).decode("ascii")
        self.classes[sha] = (
            f".{name}{{aspect-ratio:{screen.width}/{screen.height};"
            f'background-image:url("data:image/png;base64,{data}")}}'
        )
        return name, "", screen.width, screen.height

    def frame(self, sha: str | None, caption: str, marker_action: Any = None, verdict: str = "allow") -> str:
        """A figure with the screen ``sha`` and, when given, the action's target drawn over it."""
        if not isinstance(sha, str):
            missing = '<div class="shot missing">no screen recorded</div>'
            return f'<figure class="frame">{missing}<figcaption>{e(caption, 200)}</figcaption></figure>'
        css, refused, width, height = self.shot_class(sha)
        # seen only in a takeover's private stretch (core.private): marked, when it is in at all
        private = " private" if self.run.screen(sha).private else ""
        label = e(f"{caption} · screen {sha[:12]}{private and ' · private'}", 200)
        if not css:
            why = e(refused or "missing", 300)
            return (
                f'<figure class="frame{private}"><div class="shot missing">screen {e(sha[:12], 20)}…: {why}</div>'
                f"<figcaption>{label}</figcaption></figure>"
            )
        svg = ""
        if marker_action is not None and width and height:
            svg = _svg(marker_of(marker_action, width, height), width, height, verdict)
        after = " after" if caption.startswith("after") else ""
        return (
            f'<figure class="frame{after}{private}"><div class="shot {css}" role="img" '
            f'aria-label="{unmarked(label)}">{svg}</div>'
            f"<figcaption>{label}</figcaption></figure>"
        )


def _svg(marker: Marker, width: int, height: int, verdict: str) -> str:
    if marker.empty:
        return ""
    cls = f"mk mk-{verdict}"
    size = max(6, min(width, height) // 40)
    parts = []
    if marker.region is not None:
        x0, y0, x1, y1 = marker.region
        parts.append(f'<rect class="{cls}" x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}"/>')
    elif len(marker.points) > 1:
        points = " ".join(f"{x},{y}" for x, y in marker.points)
        (sx, sy), (ex, ey) = marker.points[0], marker.points[-1]
        parts.append(f'<polyline class="{cls}" points="{points}"/>')
        parts.append(f'<circle class="{cls}" cx="{sx}" cy="{sy}" r="{size}"/>')
        parts.append(f'<circle class="mk-dot mk-{verdict}" cx="{ex}" cy="{ey}" r="{size // 2 + 1}"/>')
    else:
        (x, y) = marker.points[0]
        parts.append(f'<circle class="{cls}" cx="{x}" cy="{y}" r="{size * 2}"/>')
        parts.append(f'<circle class="mk-dot mk-{verdict}" cx="{x}" cy="{y}" r="{max(3, size // 3)}"/>')
        dx, dy = marker.scroll
        if dx or dy:  # the wheel's direction, as an arrow from the point
            tx, ty = (
                x + (size * 5 if dx > 0 else -size * 5 if dx < 0 else 0),
                y + (size * 5 if dy > 0 else -size * 5 if dy < 0 else 0),
            )
            parts.append(f'<line class="{cls}" x1="{x}" y1="{y}" x2="{tx}" y2="{ty}"/>')
    return f'<svg viewBox="0 0 {width} {height}" preserveAspectRatio="none" aria-hidden="true">{"".join(parts)}</svg>'


def render(run: Run) -> str:
    """The whole HTML document for ``run``."""
    page = _Page(run)
    _header(page)
    _summary(page)
    _steps(page)
    _others(page)
    style = _BASE_CSS + "\n".join(page.classes.values()) + "\n"
    digest = base64.b64encode(hashlib.sha256(style.encode("utf-8")).digest()).decode("ascii")
    csp = f"default-src 'none'; img-src data:; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>cua-tui run {e(run.run_id, 80)}</title>\n<style>{style}</style></head>\n<body>\n"
    )
    return head + "".join(page.out) + "\n</body></html>\n"


def _header(page: _Page) -> None:
    """The verdict first: how the run ended (a claim unless the record vouches for it), then its record,
    then who checked it and where (core/ending.py: one word for each)."""
    run, report = page.run, page.run.report
    record = (
        ending.TAMPERED
        if run.tampered
        else ending.UNUSABLE
        if report.code == VerifyExit.UNUSABLE
        else ending.INTACT
        if report.sealed
        else ending.UNSEALED
    )
    ended = run.timeline.ended
    broken = report.finding is not None
    # a broken record is exported up to its first bad line: an end after it is not shown
    no_end = "no end before the bad line" if broken else "no end recorded"
    said = ending.headline(ended.status if ended is not None else None, record, no_end=no_end)
    why = f" · {e(ended.reason, 500)}" if ended is not None else "" if broken else " (interrupted, or the log was cut)"
    page.add(f"<h1>cua-tui run {e(run.run_id, 80)}</h1>\n")
    page.add(f'<section class="verdict {said.tone}" id="verdict">')
    page.add(f'<p class="status"><strong class="tone-{said.tone}">{e(said.text, 60)}</strong>{why}</p>')
    # what verify found: where the record breaks, or what it covers
    found = f": {report.finding}" if report.finding is not None else f" · {report.summary.removeprefix('intact: ')}"
    page.add(f'<p class="record record-{record}"><strong>{ending.record_label(record)}</strong>{e(found, 500)}</p>')
    for done in run.events(ev.VerificationDone):
        # who checked it and where: the sandbox's own word (or a place not recorded) is marked
        checked = e(ending.checked_by(done), 300)
        checked = checked if ending.ours(done) else f"<strong>{checked}</strong>"
        verdict = "passed" if done.passed is True else "failed"
        page.add(f'<p class="checked">{checked}: {verdict} · {e(done.detail, 500)}</p>')
    page.add("<dl>", f"<dt>chain head</dt><dd><code>{e(report.head, 64)}</code></dd>")
    page.add(f"<dt>events</dt><dd>{report.events}</dd>")
    page.add(f"<dt>sealed</dt><dd>{'yes' if report.sealed else 'no'}</dd>")
    signed = "signature verified" if report.signature_checked else "signed, not checked" if report.signed else "no"
    page.add(f"<dt>signed</dt><dd>{signed}</dd></dl>")
    for finding in report.findings[:20]:
        where = f"line {finding.line}: " if finding.line else ""
        page.add(f'<p class="mono">{e(finding.kind.value, 40)} · {where}{e(finding.detail, 500)}</p>')
    if run.tampered:
        page.add(
            "<p><strong>What follows is what the altered log says, not a trustworthy record of the run.</strong></p>"
        )
    for note in [*report.notes[:20], *run.notes[:20]]:
        page.add(f'<p class="note">note: {e(note, 500)}</p>')
    if run.private:
        page.add(f'<p class="note" id="private">private screens: {e(run.private_line(), 500)}</p>')
    page.add("</section>\n")


def _summary(page: _Page) -> None:
    run, info, line = page.run, page.run.info, page.run.timeline
    started, ended = line.started, line.ended
    rows: list[tuple[str, str]] = [("task", f'<span class="pre">{e(run.task, 4000, lines=True)}</span>')]
    for name in ("backend", "agent", "model", "screen", "started_at_iso", "lab", "url"):
        value = info.get(name, getattr(started, name, None) if started is not None else None)
        if value not in (None, "", []):
            rows.append((name.replace("_iso", "").replace("_", " "), e(value, 300)))
    policy = info.get("policy")
    if isinstance(policy, dict):
        rows.append(
            ("policy", f"{e(policy.get('name', ''), 100)} · sha256 <code>{e(policy.get('sha256', ''), 64)}</code>")
        )
    elif started is not None:
        rows.append(("policy", f"{e(started.policy, 100)} · sha256 <code>{e(started.policy_sha256, 64)}</code>"))
    if ended is not None:
        # its status, and who checked it, lead the page (``_header``)
        rows.append(("counts", e(f"{ended.turns} turn(s), {ended.steps} step(s), {ended.executed} executed", 200)))
        if ended.final_text:
            rows.append(("final text", f'<span class="pre">{e(ended.final_text, lines=True)}</span>'))
    for kill in run.events(ev.Killed):
        rows.append(("kill switch", f"pressed by {e(kill.by, 200)} while {e(kill.during, 200)}"))
    page.add("<h2>Run</h2><dl>", *(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows), "</dl>\n")
    if line.first_screen:
        page.add('<div class="frames">', page.frame(line.first_screen, "initial screen"), "</div>\n")


def _verdict_of(step: Step) -> str:
    value = str(step.verdict.verdict) if step.verdict is not None else ""
    return value if value in ("allow", "confirm", "block") else "block" if step.proposal.error else "allow"


def _steps(page: _Page) -> None:
    steps = page.run.timeline.steps
    hands = [hand(step) for step in steps[:MAX_STEPS]]
    page.add(f"<h2>Timeline</h2><p>{len(steps)} step(s).</p>")
    page.add(
        '<table class="timeline"><thead><tr><th>step</th><th>turn</th><th>action (what ran)</th><th>verdict</th>'
        "<th>decided</th><th>outcome</th><th></th></tr></thead>"
    )
    sizes = Counter(said.takeover for said in hands)
    stretch = -1  # the takeover whose rows are open (0: the model's)
    for step, said in zip(steps, hands, strict=False):
        if said.takeover != stretch:
            # each takeover one marked stretch of rows, headed by who had the desktop
            page.add("</tbody>" if stretch >= 0 else "", _stretch_head(step, said, sizes[said.takeover]))
            stretch = said.takeover
        outcome = step.outcome.status if step.outcome is not None else "no outcome"
        flags = "".join(f'<span class="badge">{f}</span>' for f in sorted(step.flags))
        edited = ' class="edited"' if said.edited else ""
        page.add(
            f'<tr{edited}><td><a href="#step-{step.number + 1}">{step.number + 1}</a></td><td>{e(step.turn, 12)}</td>'
            f'<td>{_ran(said)}</td><td class="v-{_verdict_of(step)}">{e(_verdict_of(step), 12)}</td>'
            f'<td>{_decided(said)}</td><td class="o-{e(outcome, 20)}">{e(outcome, 20)}</td><td>{flags}</td></tr>'
        )
    page.add("</tbody>" if stretch >= 0 else "", "</table>\n")
    refused = {key(s.turn): s for s in page.run.events(ev.TurnRefused)}
    checks: dict[Any, list[ev.SafetyChecksRaised]] = {}
    for raised in page.run.events(ev.SafetyChecksRaised):
        checks.setdefault(key(raised.turn), []).append(raised)
    last_turn: Any = None
    last_takeover = 0
    for step, said in zip(steps, hands, strict=False):
        if step.turn != last_turn:
            last_turn = step.turn
            _turn_heading(page, step, checks.get(key(step.turn), []))
        if step.takeover is not None and step.takeover_number != last_takeover:
            # the reviewer's own stretch of the timeline
            last_takeover = step.takeover_number
            page.add(
                f'<h3 class="takeover">Takeover #{step.takeover_number}: the desktop was '
                f"{e(step.takeover.operator or step.takeover.by, 200)}'s ({e(step.takeover.where, 200)}); "
                "the steps below are the reviewer's actions, not the model's</h3>"
            )
        _step(page, step, said)
    if len(steps) > MAX_STEPS:
        page.add(f"<p><strong>{len(steps) - MAX_STEPS} more step(s) not drawn</strong> (at most {MAX_STEPS}).</p>")
    for turn in refused.values():
        page.add(
            f"<h3>Turn {e(turn.turn, 12)} refused whole</h3><p>{e(turn.actions, 12)} action(s): {e(turn.reason)}</p>"
        )


def _stretch_head(step: Step, said: Hand, size: int) -> str:
    """A ``<tbody>`` for the model's rows, or one marked for a takeover's, headed by who had the desktop."""
    if not said.takeover or step.takeover is None:
        return "<tbody>"
    who = e(step.takeover.operator or step.takeover.by, 200)
    return (
        f'<tbody class="takeover" id="takeover-{said.takeover}"><tr class="stretch"><th colspan="7">'
        f"Takeover #{said.takeover} · {who} had the desktop ({e(step.takeover.where, 200)}) · {size} "
        "action(s), the reviewer's own, not the model's</th></tr>"
    )


def _words(summary: str, record: object, limit: int = 200) -> str:
    """An action's words and a typed text's SHA-256 beside them, escaped (``describe.action_words``)."""
    return e(describe.action_words(summary, record, shown=_as_recorded), limit)


def _as_recorded(text: object, *, limit: int | None = None) -> str:
    """A recorded string cut to ``limit`` and left for ``e`` to make visible (its stand-ins marked)."""
    text = text if isinstance(text, str) else str(text)
    return truncate(text, limit) if limit is not None else text


def _ran(said: Hand) -> str:
    """What ran; beside it, when a reviewer changed it first, ``edited`` and the model's proposal."""
    ran = f'<span class="ran">{_words(said.summary, said.action)}</span>'
    if said.edited:
        ran += ' <span class="badge edited">edited</span>'
        ran += f'<br><span class="proposed">proposed: {_words(said.proposed, said.proposed_action)}</span>'
    elif said.refused is not None:
        ran += ' <span class="badge edited">edit refused</span>'
    return ran


def _decided(said: Hand) -> str:
    """How it was decided: each decision but the policy's, its way first (person, group, deadline, budget,
    grant, rule, takeover, ...); the policy's alone when it decided alone."""
    chosen = said.chosen or said.decisions[-1:]
    return "<br>".join(
        f'<span class="how how-{e(way.how, 20)}">{e(way.how, 20)}</span> {e(describe.decided_words(way, _as_recorded))}'
        for way in chosen
    )


def _turn_heading(page: _Page, step: Step, checks: Iterable[ev.SafetyChecksRaised]) -> None:
    page.add(f'<h2 id="turn-{e(step.turn, 12)}">Turn {e(step.turn, 12)}</h2>')
    if step.model_text:
        page.add(f'<p>The model said: <span class="pre">{e(step.model_text, 4000, lines=True)}</span></p>')
    for raised in checks:
        items = raised.checks if isinstance(raised.checks, list) else []
        for check in items[:20]:
            check = check if isinstance(check, dict) else {}
            page.add(
                f"<p>Safety check raised by the model: <code>{e(check.get('code', ''), 100)}</code> "
                f"{e(check.get('message', ''), 500)}</p>"
            )


def _decisions(page: _Page, said: Hand) -> None:
    """Who decided a step and how; a reviewer's refused edit beside the decision that carried it."""
    for way in said.decisions:
        decision = way.decision
        note = f" · {e(decision.note)}" if decision.note and decision.by != "policy" else ""
        shown = describe.shown_for(decision)
        note += f" · {e(shown)}" if shown else ""
        group = describe.group_for(decision)
        note += f" · {e(group)}" if group else ""
        page.add(
            f'<dt>decision</dt><dd><span class="how how-{e(way.how, 20)}">{e(way.how, 20)}</span> '
            f"<strong>{e(decision.decision, 20)}</strong> by {e(decision.by, 200)}{note}</dd>"
        )
    if said.refused is not None:
        page.add(f'<dt>edit refused</dt><dd class="v-confirm">{e(describe.refused_edit_line(said))}</dd>')


def _typed_text(page: _Page, label: str, record: object) -> None:
    typing = typed(record)
    if typing is not None:
        page.add(
            f"<dt>{label}</dt><dd>{typing[0]} characters, never stored; SHA-256 <code>{e(typing[1], 64)}</code></dd>"
        )


def _step(page: _Page, step: Step, said: Hand) -> None:
    """One step: what ran (and, when a reviewer changed it, what was proposed), judged, decided and done,
    and the screens before and after it."""
    verdict = _verdict_of(step)
    flags = " ".join(f"flag-{f}" for f in sorted(step.flags))
    number = step.number + 1
    page.add(f'<section class="step {flags}{" edited" if said.edited else ""}" id="step-{number}">')
    page.add(f"<h3>Step {number} · turn {e(step.turn, 12)} · action {e(_index(step), 12)} — {_ran(said)}")
    page.add("".join(f'<span class="badge">{f}</span>' for f in sorted(step.flags)), "</h3><dl>")
    if said.edited:
        editor = e(said.editor, 200) or "the reviewer"
        page.add(
            f'<dt>ran</dt><dd class="v-confirm"><strong>edited</strong> by {editor} before it ran: '
            f"{_words(said.summary, said.action, 300)}</dd>"
            f"<dt>proposed</dt><dd>the model's, not run: {_words(said.proposed, said.proposed_action, 300)}</dd>"
        )
    _typed_text(page, "typed text", said.action)
    if said.edited:
        _typed_text(page, "proposed text", said.proposed_action)
    if step.by_reviewer:
        page.add(f"<dt>by</dt><dd><strong>{e(describe.takeover_line(step), 300)}</strong></dd>")
    if step.verdict is not None:
        rule = f" (rule <code>{e(step.verdict.rule, 200)}</code>)" if step.verdict.rule else ""
        page.add(f'<dt>verdict</dt><dd class="v-{verdict}">{e(verdict, 12)}: {e(step.verdict.reason)}{rule}</dd>')
    for request in step.requests:
        page.add(f"<dt>asked</dt><dd>{e(request.subject, 40)}: {e(request.reason)}</dd>")
    _decisions(page, said)
    if step.outcome is not None:
        outcome = step.outcome
        duration = f" · {outcome.duration_ms:.1f} ms" if type(outcome.duration_ms) in (int, float) else ""
        page.add(
            f'<dt>outcome</dt><dd><span class="o-{e(outcome.status, 20)}">{e(outcome.status, 20)}</span>{duration}'
            f'</dd><dt>the model heard</dt><dd><code class="pre">{e(outcome.message, lines=True)}</code></dd>'
        )
    else:
        page.add("<dt>outcome</dt><dd><strong>none recorded</strong></dd>")
    for egress in step.refused_egress:
        page.add(f"<dt>egress refused</dt><dd>{_egress(egress)}</dd>")
    if step.told:
        page.add(f'<dt>told at hand-back</dt><dd><code class="pre">{e(step.told, 2000, lines=True)}</code></dd>')
    for error in step.errors:
        page.add(f"<dt>error</dt><dd>{e(error.where, 100)}: {e(error.message)}</dd>")
    page.add("</dl>")
    # where it ran (a reviewer's edit moves it)
    marker = step.ran
    shots = screens(step)
    what = describe.screen_before(step)
    before = page.frame(shots.before, f"before step {number}" + (f": {what}" if what else ""), marker, verdict)
    if shots.after:
        after = page.frame(shots.after, f"after step {number}", marker, verdict)
    elif shots.not_run:
        # never "after it ran": it did not run, and there is no screen after it
        after = f'<figure class="frame"><div class="shot missing">step {number} not run: {e(shots.not_run, 20)}'
        after += "; no screen after it</div></figure>"
    else:
        after = ""
    page.add('<div class="frames">', before, after, "</div></section>\n")


def _index(step: Step) -> str:
    return str(step.index + 1) if type(step.index) is int else str(step.index)


def _egress(egress: ev.Egress) -> str:
    reason = f" · {e(egress.reason, 300)}" if egress.reason else ""
    return f"<code>{e(egress.method, 20)} {e(egress.host, 300)}:{e(egress.port, 12)}</code>{reason}"


def _drill(drill: ev.DrillAnswered) -> str:
    """One drill's answer: before which request, what was right, the answer, caught or not (all as recorded)."""
    result = "caught" if drill.caught is True else "missed" if drill.caught is False else ""
    result = result or ("a false alarm" if drill.false_alarm else "right")
    index = drill.index + 1 if isinstance(drill.index, int) else "?"
    return (
        f"drill {e(drill.drill, 80)} before turn {e(drill.turn, 12)} #{e(index, 12)}: "
        f"{e(drill.answer, 20)} by {e(drill.operator or drill.by, 80)} (right: {e(drill.right, 20)}), "
        f"{e(result, 20)} · {e(drill.why, 300)}"
    )


def _others(page: _Page) -> None:
    """What belongs to no step: every refused egress request, errors, notes."""
    refused = [g for g in page.run.events(ev.Egress) if g.allowed is not True]
    if refused:
        page.add(f"<h2>Refused egress</h2><p>{len(refused)} request(s) from the sandbox refused by the proxy.</p><ul>")
        page.add(*(f"<li>{_egress(g)}</li>" for g in refused[:500]), "</ul>\n")
    drills = page.run.events(ev.DrillAnswered)
    if drills:
        # apart from the run's own steps: planted decisions, none of which acted (docs/drills.md)
        page.add(f"<h2>Drills</h2><p>{len(drills)} drill(s) shown before real requests; none of them acted.</p><ul>")
        page.add(*(f"<li>{_drill(d)}</li>" for d in drills[:500]), "</ul>\n")
    errors = page.run.events(ev.ErrorRaised)
    if errors:
        page.add("<h2>Errors</h2><ul>")
        page.add(*(f"<li>{e(x.where, 100)}: {e(x.message)}</li>" for x in errors[:200]), "</ul>\n")
    page.add(f'<p class="note">Exported by cua-tui from {e(page.run.path.name, 200)}.</p>')
