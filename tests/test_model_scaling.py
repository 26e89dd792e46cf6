"""Screenshot scaling for the model adapters, over many screen sizes (hypothesis).

For every display size and every model tier: the screenshot sent fits the model's limits with the
display's aspect ratio; a point the model picks in its image comes back, through the very parsers the
supervisor uses, as the display pixel at the centre of the area that model pixel covers; and a point
outside the model's image is refused, never clamped.
"""

from __future__ import annotations

import io
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cua_tui.agents.images import (
    ANTHROPIC_NEW,
    ANTHROPIC_OLD,
    OPENAI_ORIGINAL,
    fit_png,
    image_limits,
)
from cua_tui.agents.vendors import ImageLimits
from cua_tui.core.actions import ActionError, parse_anthropic, parse_openai
from cua_tui.core.geometry import MAX_SIDE, MIN_SIDE, Scaling, Size
from cua_tui.core.imaging import encode_png

MODELS = [
    ("anthropic", "claude-sonnet-5"),
    ("anthropic", "claude-opus-4-8"),
    ("anthropic", "claude-sonnet-4-6"),
    ("anthropic", "a-proxy-alias"),
    ("openai", "gpt-5.6-sol"),
    ("openai", "computer-use-preview"),
]
sides = st.integers(MIN_SIDE, MAX_SIDE)
displays = st.builds(Size, sides, sides)
models = st.sampled_from(MODELS)


def centre_of_preimage(v: int, model_side: int, display_side: int) -> int:
    """The display pixel the model means by model pixel ``v``: the middle of the display pixels that
    show it (those that ``to_model`` sends back to ``v``), found by brute force."""
    guess = v * display_side // model_side
    window = range(max(0, guess - 2), min(display_side, (v + 1) * display_side // model_side + 3))
    pixels = [d for d in window if d * model_side // display_side == v]
    assert pixels, f"model pixel {v} shows no display pixel"
    return pixels[(len(pixels) - 1) // 2]


def within(limits: ImageLimits, size: Size) -> bool:
    return (limits.long_edge is None or max(size) <= limits.long_edge) and (
        limits.pixels is None or size.pixels <= limits.pixels
    )


@settings(max_examples=400, deadline=None)
@given(display=displays, model=models)
def test_the_model_image_fits_the_limits_with_the_display_aspect(display: Size, model: tuple[str, str]) -> None:
    limits = image_limits(*model)
    scaling = limits.scaling(display)
    assert scaling.display == display
    assert within(limits, scaling.model)
    if within(limits, display):
        assert scaling.is_identity  # never shrink what already fits
    else:
        assert scaling.model.width <= display.width and scaling.model.height <= display.height
        # Same aspect ratio: both sides are the display's times one common factor, to within 2 px.
        factor = 1.0
        if limits.long_edge:
            factor = min(factor, limits.long_edge / max(display))
        if limits.pixels:
            factor = min(factor, math.sqrt(limits.pixels / display.pixels))
        assert abs(scaling.model.width - display.width * factor) < 2
        assert abs(scaling.model.height - display.height * factor) < 2


@settings(max_examples=400, deadline=None)
@given(display=displays, model=models, data=st.data())
def test_a_model_point_lands_on_the_display_pixel_it_means(
    display: Size, model: tuple[str, str], data: st.DataObject
) -> None:
    scaling = image_limits(*model).scaling(display)
    x = data.draw(st.integers(0, scaling.model.width - 1), label="x")
    y = data.draw(st.integers(0, scaling.model.height - 1), label="y")
    expected = (
        centre_of_preimage(x, scaling.model.width, display.width),
        centre_of_preimage(y, scaling.model.height, display.height),
    )
    openai = parse_openai({"type": "click", "button": "left", "x": x, "y": y}, scaling)
    anthropic = parse_anthropic("left_click", {"coordinate": [x, y]}, scaling, "computer")
    assert openai.point == anthropic.point == expected
    assert display.contains(*expected)
    assert scaling.to_model(*expected) == (x, y)


@settings(max_examples=400, deadline=None)
@given(display=displays, model=models, data=st.data())
def test_a_point_outside_the_model_image_is_refused(display: Size, model: tuple[str, str], data: st.DataObject) -> None:
    scaling = image_limits(*model).scaling(display)
    w, h = scaling.model
    inside_x, inside_y = data.draw(st.integers(0, w - 1)), data.draw(st.integers(0, h - 1))
    outside = data.draw(
        st.sampled_from(
            [
                (w, inside_y),
                (inside_x, h),
                (-1, inside_y),
                (inside_x, -1),
                (w + data.draw(st.integers(0, 10_000)), inside_y),
                (inside_x, h + data.draw(st.integers(0, 10_000))),
            ]
        )
    )
    with pytest.raises(ActionError) as info:
        parse_openai({"type": "click", "button": "left", "x": outside[0], "y": outside[1]}, scaling)
    assert info.value.code == "outside_screen"
    with pytest.raises(ActionError) as info:
        parse_anthropic("left_click", {"coordinate": list(outside)}, scaling, "computer")
    assert info.value.code == "outside_screen"


@settings(max_examples=25, deadline=None)
@given(
    display=st.builds(Size, st.integers(MIN_SIDE, 3200), st.integers(MIN_SIDE, 2400)),
    limits=st.sampled_from([ANTHROPIC_NEW, ANTHROPIC_OLD, OPENAI_ORIGINAL, ImageLimits(1024, 600_000)]),
)
def test_the_png_sent_has_exactly_the_scaled_size(display: Size, limits: ImageLimits) -> None:
    frame = encode_png(Image.new("RGB", display, (200, 30, 30)))
    png, scaling = fit_png(frame, limits)
    assert scaling == limits.scaling(display)
    with Image.open(io.BytesIO(png)) as img:
        assert img.format == "PNG"
        assert img.size == tuple(scaling.model)
    if scaling.is_identity:
        assert png is frame.png  # sent as captured, no re-encoding


def test_resizing_keeps_content_where_the_mapping_says() -> None:
    """A marker drawn on the display appears in the model image where ``to_model`` puts it."""
    display = Size(3000, 2000)
    img = Image.new("RGB", display, (255, 255, 255))
    img.paste((0, 0, 0), (2000, 1000, 2100, 1100))  # a 100 px black square
    png, scaling = fit_png(encode_png(img), ANTHROPIC_OLD)
    assert scaling != Scaling.identity(display)
    cx, cy = scaling.to_model(2050, 1050)
    with Image.open(io.BytesIO(png)) as small:
        assert small.convert("RGB").getpixel((cx, cy)) == (0, 0, 0)
        assert small.convert("RGB").getpixel(scaling.to_model(1900, 900)) == (255, 255, 255)
