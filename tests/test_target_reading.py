"""The target is legible (issue 22, point 1), in parts: the element under a point found from the pixels
(core/elements.py), the zoom that frames a field with its words and a button with its label (tui/frames.py),
and the panel that names a click's target and where typing goes (core/describe.py). The same on real lab
pages through Tesseract: tests/e2e/test_ocr.py and tests/e2e/test_tmux_labels.py."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw

from cua_tui.core import describe
from cua_tui.core.actions import Action, Kind
from cua_tui.core.elements import element_box
from cua_tui.core.imaging import ScreenLimit
from cua_tui.core.ports import DecisionRequest
from cua_tui.tui.frames import MARKER, Target, prepare

PAGE = (243, 245, 248)
LIMIT = ScreenLimit(1024, 720)


def page() -> Image.Image:
    """A form as the labs draw it: a bordered field with a placeholder, a filled button with its word, a
    paragraph of text, on a light page."""
    image = Image.new("RGB", (1024, 720), PAGE)
    draw = ImageDraw.Draw(image)
    draw.rectangle((40, 216, 519, 263), fill="white", outline=(40, 80, 140), width=2)  # the field
    draw.text((56, 232), "Enter the phrase", fill=(120, 120, 120))
    draw.rectangle((40, 296, 199, 343), fill=(44, 90, 160), outline=(20, 40, 80), width=2)  # the button
    draw.text((100, 312), "Verify", fill="white")
    draw.text((40, 100), "Type the phrase below into the field and click Verify.", fill=(20, 30, 40))
    return image


def png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_the_box_of_a_field_and_of_a_button_from_any_point_inside() -> None:
    image = page()
    for point in ((280, 240), (60, 238), (500, 250)):  # the middle, on a letter, near the right edge
        assert element_box(image, point) == (42, 218, 518, 262), point
    assert element_box(image, (120, 320)) == (42, 298, 198, 342)  # on the word itself


def test_text_on_the_page_and_the_page_itself_have_no_box() -> None:
    image = page()
    assert element_box(image, (120, 105)) is None  # a line of text
    assert element_box(image, (800, 600)) is None  # empty page
    assert element_box(image, (5000, 5)) is None  # off the screen


def test_the_zoom_on_a_typing_target_shows_the_start_of_the_field_with_its_words_outlined() -> None:
    # the click point is the middle of a field far wider than the pane: the zoom shows where its words are
    target = Target(point=(280, 240), kind="type", element=(42, 218, 518, 262))
    rendered = prepare(png(page()), 94, 44, target, limit=LIMIT, zoom=True)
    assert rendered.framed is not None and rendered.magnify >= 1
    x0, y0, x1, y1 = rendered.framed
    assert x0 <= 42 - 2 and x1 > 56 + 40  # the field's left edge and the start of its placeholder
    assert y0 <= 218 and y1 >= 262
    picture = rendered.image.convert("RGB")
    outline_left = (42 - 2 - x0) * rendered.magnify
    column = [picture.getpixel((outline_left, y)) for y in range(picture.height)]
    assert column.count(MARKER) > 20  # the field is outlined, not a crosshair in a blank box


def test_the_zoom_on_a_click_keeps_the_buttons_word_in_view() -> None:
    target = Target(point=(180, 320), kind="click", element=(42, 298, 198, 342))  # clicked near the right end
    rendered = prepare(png(page()), 200, 44, target, limit=LIMIT, zoom=True)
    assert rendered.framed is not None
    x0, _y0, x1, _y1 = rendered.framed
    assert x0 <= 100 and x1 >= 140  # "Verify" (drawn from x=100) is framed, not cut at the point


def test_the_panel_names_the_click_target_and_where_typing_goes() -> None:
    click = DecisionRequest("r", 1, 2, "c", "action", "submits the form", action=Action(Kind.CLICK, point=(120, 320)))
    text = "".join(part for part, _ in describe.request_panel(click, 3, "task", "Verify"))
    assert "action  click “Verify” at (120, 320)" in text
    hostile = "".join(part for part, _ in describe.request_panel(click, 3, "task", "[red]x\x1b[2J"))
    assert "[red]x" in hostile and "\x1b" not in hostile  # page words shown literally
    line = describe.field_destination((280, 240), "Enter the phrase", "Phrase", boxed=True)
    assert line == "the field “Enter the phrase”, labelled “Phrase” at (280, 240) (read from the screen)"


def test_the_compact_panel_puts_the_keys_first_and_keeps_the_models_words() -> None:
    typing = DecisionRequest("r", 1, 1, "c", "action", "typing counts", action=Action(Kind.TYPE, text="hello"))
    parts = describe.request_panel(typing, 2, "task", None, model_text="I will type hello.", compact=True)
    text = "".join(part for part, _ in parts)
    lines = text.splitlines()
    assert lines[1].startswith("y approve") and "k kill switch" in lines[1]
    assert "  hello" in lines and "model   I will type hello." in text and "task" not in text
