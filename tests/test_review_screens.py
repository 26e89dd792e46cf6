"""Every review shows the screen that was there (issue 22, point 4): the timeline's one rule, the HTML
export and the film strip, on real sim runs where step 2 typed into the field and step 3 was rejected."""

from __future__ import annotations

import dataclasses
import re

import pytest
from PIL import Image
from review_runs import SHOWN_MS, Reviewed, Reviewer, reviewed_run

from cua_tui.core import describe
from cua_tui.core import events as ev
from cua_tui.core import timeline as tl
from cua_tui.core.ports import Answer
from cua_tui.export import animation, open_run
from cua_tui.export import html as html_export


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Reviewed:
    """Decisions that record no screen (the rule's fallback)."""
    return reviewed_run(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def lagging(tmp_path_factory: pytest.TempPathFactory) -> Reviewed:
    """The rejection records the screen its reviewer saw: one from before the typing."""
    return reviewed_run(tmp_path_factory.mktemp("lagging"), Reviewer(record=True, lagging=True))


def steps(run: Reviewed) -> list[tl.Step]:
    with open_run(run.path) as opened:
        return opened.timeline.steps


def test_before_is_the_screen_on_the_desktop_when_the_step_was_decided_or_run(plain: Reviewed) -> None:
    clicked, typed, rejected, never = steps(plain)
    assert plain.reviewer.seen == [plain.clicked, plain.typed]  # what the supervisor showed each decision
    assert tl.screens(clicked).before == plain.initial  # the first step: the model's screenshot
    assert tl.screens(typed).before == plain.clicked
    assert tl.screens(rejected).before == plain.typed  # the field with its text, not the turn's screenshot
    assert tl.screens(never).before == plain.typed
    for step, status in ((rejected, "declined"), (never, "not_executed")):
        shots = tl.screens(step)
        assert shots.not_run == status and shots.after is None and shots.pick("after") == shots.before
        assert f"not run: {status}" in describe.step_screen(step, "after")
        assert "after it ran" not in describe.step_screen(step, "after")
    assert describe.step_screen(typed, "after") == "after it ran"


def test_a_decision_that_records_its_screen_is_shown_with_it(lagging: Reviewed) -> None:
    _clicked, typed, rejected, _never = steps(lagging)
    decision = rejected.decisions[-1]
    assert decision.screen == lagging.clicked and decision.shown_ms == SHOWN_MS  # as the supervisor recorded it
    assert tl.screens(rejected).before == lagging.clicked  # what the reviewer saw, not the desktop's screen
    assert tl.screens(typed).before == lagging.clicked  # recorded too, and the same as the desktop's
    assert "reviewer was shown" in describe.step_screen(rejected)
    panel = "".join(text for text, _role in describe.step_panel(rejected, 4))
    assert "reject by human · not that text · shown 2.4 s before the answer" in panel


def html_of(run: Reviewed) -> str:
    with open_run(run.path) as opened:
        return html_export.render(opened)


def section(document: str, number: int) -> str:
    match = re.search(rf'<section class="step[^"]*" id="step-{number}">(.*?)</section>', document, re.S)
    assert match is not None
    return match.group(1)


def figures(part: str) -> list[tuple[str, str]]:
    """(the screen's CSS class or "missing", the figure's text) of each figure in ``part``."""
    found = []
    for figure in re.findall(r"<figure.*?</figure>", part, re.S):
        shot = re.search(r'class="shot (s-[0-9a-f]{20}|missing)', figure)
        found.append((shot.group(1) if shot else "", re.sub(r"<[^>]+>", " ", figure)))
    return found


def css(sha: str) -> str:
    return f"s-{sha[:20]}"


def test_html_shows_the_typed_field_before_the_rejected_step_and_says_it_never_ran(plain: Reviewed) -> None:
    document = html_of(plain)
    rejected = figures(section(document, 3))
    assert [shot for shot, _text in rejected] == [css(plain.typed), "missing"]
    assert "before step 3: the desktop when decided" in rejected[0][1]
    assert "step 3 not run: declined; no screen after it" in rejected[1][1]
    assert "after step 3" not in document and "after step 4" not in document
    assert "step 4 not run: not_executed" in section(document, 4)
    ran = figures(section(document, 2))
    assert [shot for shot, _text in ran] == [css(plain.clicked), css(plain.typed)]
    assert "after step 2" in ran[1][1]


def test_html_shows_the_screen_a_decision_recorded_and_for_how_long(lagging: Reviewed) -> None:
    part = section(html_of(lagging), 3)
    shot, text = figures(part)[0]
    assert shot == css(lagging.clicked) and "the screen its reviewer was shown at the decision" in text
    assert "shown 2.4 s before the answer" in part


def film(run: Reviewed) -> tuple[list[animation._Shot], list[bytes], dict[str, bytes]]:
    """The strip's shots, the pixels of each frame's picture (its caption cut off), and the picture of
    each of the run's screens without a marker."""
    with open_run(run.path) as opened:
        shots = animation._shots(opened)
        painter = animation._Painter(opened, 400)
        frames = list(painter.frames(shots))
        height = frames[0].height - animation._CAPTION
        bare = {sha: painter.frame(animation._Shot(sha, ""), height) for sha in (run.clicked, run.typed)}

    def picture(frame: Image.Image) -> bytes:
        return frame.crop((0, 0, frame.width, frame.height - animation._CAPTION)).tobytes()

    return shots, [picture(f) for f in frames], {sha: picture(f) for sha, f in bare.items()}


def test_film_strip_keeps_the_typed_text_on_the_rejected_step(plain: Reviewed) -> None:
    shots, pictures, bare = film(plain)
    assert [s.sha for s in shots] == [plain.initial, plain.clicked, plain.typed, plain.typed, plain.typed]
    assert shots[3].caption.endswith("not run: declined") and shots[4].caption.endswith("not run: not_executed")
    assert shots[3].verdict == "block"  # marked as not run
    # no frame in which the text vanishes: the rejected step's picture is the typing's, not the one before it
    assert pictures[3] == pictures[2] == bare[plain.typed] != bare[plain.clicked]


def test_film_strip_shows_the_screen_a_decision_recorded(lagging: Reviewed) -> None:
    shots, pictures, bare = film(lagging)
    assert shots[3].sha == lagging.clicked and pictures[3] == bare[lagging.clicked] != bare[lagging.typed]
    with open_run(lagging.path) as opened:
        assert animation.render(opened, "gif").startswith(b"GIF8")  # the whole strip still encodes


def test_a_decision_naming_a_screen_the_run_never_recorded_is_not_followed(lagging: Reviewed) -> None:
    with open_run(lagging.path) as opened:
        stamped = opened.stamped
    stray = "ab" * 32
    edited = [
        dataclasses.replace(s, event=dataclasses.replace(s.event, screen=stray))
        if isinstance(s.event, ev.DecisionMade) and s.event.decision == "reject"
        else s
        for s in stamped
    ]
    rejected = tl.build(edited).steps[2]
    assert rejected.decisions[-1].screen == stray
    assert tl.screens(rejected).before == lagging.typed and tl.screens(rejected).shown is None


def test_a_recorded_time_on_screen_no_run_could_have_says_nothing() -> None:
    """A hostile run directory may record any JSON integer: a number too large for a float never crashes
    replay or the export, it is left unsaid."""
    from cua_tui.core import describe
    from cua_tui.core import events as ev

    def made(shown: int) -> ev.DecisionMade:
        return ev.DecisionMade(1, 0, Answer.APPROVE, "human", shown_ms=shown)

    assert describe.shown_for(made(2400)) == "shown 2.4 s before the answer"
    assert describe.shown_for(made(10**400)) == "" and describe.shown_for(made(-1)) == ""
