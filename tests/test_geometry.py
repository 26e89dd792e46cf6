"""Screen sizes, screenshot scaling and exact coordinate mapping (cua_tui.core.geometry)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_tui.core.actions import Action, ActionError, Kind, parse_anthropic, parse_openai
from cua_tui.core.geometry import MAX_SIDE, MIN_SIDE, OutOfRange, Scaling, Size

PROPERTY = settings(max_examples=300, deadline=None)
LIGHT = settings(max_examples=150, deadline=None)

# The vendors' image limits (REFERENCE.md): long edge 1568 px and ~1.15 MP on earlier Anthropic models,
# 2576 px on newer ones; 1024x768 worth of pixels for OpenAI-sized screenshots; and no limit at all.
LIMITS = [(1568, 1_150_000), (2576, None), (1024, 786_432), (None, 1_150_000), (None, None)]

sides = st.integers(MIN_SIDE, MAX_SIDE)
displays = st.builds(Size, sides, sides)


def preimage(v: int, model_side: int, display_side: int) -> list[int]:
    """Display pixels that map back to model pixel ``v`` (brute force over a window around v*D/M)."""
    guess = v * display_side // model_side
    window = range(max(0, guess - 2), min(display_side, (v + 1) * display_side // model_side + 3))
    return [d for d in window if d * model_side // display_side == v]


def expected_display(v: int, model_side: int, display_side: int) -> int:
    """The documented rule: the middle display pixel among those that map back to the model pixel."""
    pixels = preimage(v, model_side, display_side)
    assert pixels == list(range(pixels[0], pixels[-1] + 1)), "the preimage of a model pixel is contiguous"
    return pixels[(len(pixels) - 1) // 2]


# ---------------------------------------------------------------------------------------------------
# Size
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1024x720", Size(1024, 720)),
        ("1024X720", Size(1024, 720)),
        ("1024×720", Size(1024, 720)),
        ("  1280 x 800  ", Size(1280, 800)),
        ("64x64", Size(64, 64)),
        ("8192x8192", Size(8192, 8192)),
        ("00064x0100", Size(64, 100)),
    ],
)
def test_size_parse_accepts(text: str, expected: Size) -> None:
    size = Size.parse(text)
    assert size == expected
    assert type(size.width) is int and type(size.height) is int


@pytest.mark.parametrize(
    "text",
    ["", "1024", "1024x", "x720", "1024*720", "1024x720x3", "-1024x720", "10.5x720", "1024,720", "big", "123456x720"],
)
def test_size_parse_refuses_malformed(text: str) -> None:
    with pytest.raises(ValueError) as info:
        Size.parse(text)
    assert str(info.value) == f"screen size {text!r} is not WIDTHxHEIGHT, e.g. 1024x720"


@pytest.mark.parametrize("text", ["63x720", "1024x63", "8193x720", "1024x8193", "0x0", "99999x99999"])
def test_size_parse_refuses_out_of_bounds(text: str) -> None:
    with pytest.raises(ValueError) as info:
        Size.parse(text)
    assert str(info.value) == f"screen size {text!r}: each side must be between 64 and 8192"


def test_size_parse_none_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="is not WIDTHxHEIGHT"):
        Size.parse(None)  # type: ignore[arg-type]


def test_size_basics() -> None:
    size = Size(1024, 720)
    assert str(size) == "1024x720"
    assert size.pixels == 737_280
    assert size.contains(0, 0) and size.contains(1023, 719)
    for x, y in [(-1, 0), (0, -1), (1024, 0), (0, 720), (1024, 720)]:
        assert not size.contains(x, y)
    assert Size.parse(str(size)) == size


@given(displays)
@LIGHT
def test_size_str_round_trips(size: Size) -> None:
    assert Size.parse(str(size)) == size


# ---------------------------------------------------------------------------------------------------
# Scaling.fit
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("display", "long_edge", "max_pixels", "model"),
    [
        (Size(1024, 720), 1568, 1_150_000, Size(1024, 720)),  # already fits: identity
        (Size(1280, 800), 1568, 1_150_000, Size(1280, 800)),
        (Size(1024, 768), 1024, 786_432, Size(1024, 768)),  # exactly at both limits
        (Size(1920, 1080), 1024, 786_432, Size(1024, 576)),  # long edge binds
        (Size(3840, 2160), 2576, None, Size(2576, 1449)),
        (Size(2048, 1440), 1568, 1_150_000, Size(1278, 899)),  # pixel cap binds
        (Size(8192, 8192), 1568, 1_150_000, Size(1072, 1072)),  # pixel cap binds on a square
    ],
)
def test_fit_examples(display: Size, long_edge: int, max_pixels: int | None, model: Size) -> None:
    scaling = Scaling.fit(display, long_edge, max_pixels)
    assert scaling.display == display
    assert scaling.model == model
    assert scaling.is_identity == (model == display)


def test_fit_without_limits_is_identity() -> None:
    assert Scaling.fit(Size(8192, 64)) == Scaling.identity(Size(8192, 64))


@given(displays, st.sampled_from(LIMITS))
@PROPERTY
def test_fit_respects_limits_aspect_and_never_upscales(display: Size, limits: tuple[int | None, int | None]) -> None:
    long_edge, max_pixels = limits
    scaling = Scaling.fit(display, long_edge, max_pixels)
    w, h = scaling.model
    W, H = display
    assert scaling.display == display
    assert 1 <= w <= W and 1 <= h <= H  # never upscales
    if long_edge:
        assert max(w, h) <= long_edge
    if max_pixels:
        assert w * h <= max_pixels
    fits = (not long_edge or max(W, H) <= long_edge) and (not max_pixels or display.pixels <= max_pixels)
    if fits:
        assert scaling.model == display and scaling.is_identity
        return
    assert not scaling.is_identity
    # Aspect ratio kept within 1 px: one scale factor s explains both sides to within a pixel.
    lo = max(Fraction(w - 1, W), Fraction(h - 1, H))
    hi = min(Fraction(w + 1, W), Fraction(h + 1, H))
    assert lo <= hi, f"{display} -> {scaling.model} distorts the aspect ratio"
    # Largest such image: one more pixel on each side would break a binding limit.
    edge_tight = bool(long_edge and max(w, h) >= long_edge - 1)
    pixels_tight = bool(max_pixels and (w + 2) * (h + 2) > max_pixels)
    assert edge_tight or pixels_tight, f"{display} -> {scaling.model} is needlessly small"


# ---------------------------------------------------------------------------------------------------
# Coordinate mapping
# ---------------------------------------------------------------------------------------------------
@st.composite
def scalings(draw: st.DrawFn) -> Scaling:
    """Scalings as fit() makes them, plus arbitrary downscales (model no larger than the display)."""
    display = draw(displays)
    if draw(st.booleans()):
        return Scaling.fit(display, *draw(st.sampled_from(LIMITS)))
    model = Size(draw(st.integers(1, display.width)), draw(st.integers(1, display.height)))
    return Scaling(display, model)


@given(scalings(), st.data())
@PROPERTY
def test_to_display_round_trips_and_stays_on_screen(scaling: Scaling, data: st.DataObject) -> None:
    x = data.draw(st.integers(0, scaling.model.width - 1), label="x")
    y = data.draw(st.integers(0, scaling.model.height - 1), label="y")
    dx, dy = scaling.to_display(x, y)
    assert scaling.display.contains(dx, dy)
    assert scaling.to_model(dx, dy) == (x, y)
    assert dx == expected_display(x, scaling.model.width, scaling.display.width)
    assert dy == expected_display(y, scaling.model.height, scaling.display.height)


@given(scalings(), st.data())
@PROPERTY
def test_to_model_is_floor_of_the_ratio(scaling: Scaling, data: st.DataObject) -> None:
    dx = data.draw(st.integers(0, scaling.display.width - 1), label="dx")
    dy = data.draw(st.integers(0, scaling.display.height - 1), label="dy")
    mx, my = scaling.to_model(dx, dy)
    assert scaling.model.contains(mx, my)
    assert mx == dx * scaling.model.width // scaling.display.width
    assert my == dy * scaling.model.height // scaling.display.height


@pytest.mark.parametrize(
    "scaling",
    [
        Scaling(Size(2048, 1440), Size(1024, 720)),
        Scaling.fit(Size(2048, 1440), 1568, 1_150_000),
        Scaling.fit(Size(3840, 2160), 2576),
        Scaling(Size(1000, 1000), Size(300, 300)),
    ],
    ids=str,
)
def test_every_model_pixel_round_trips(scaling: Scaling) -> None:
    """Exhaustive per axis (the mapping is separable), including both edges."""
    for x in range(scaling.model.width):
        dx, _ = scaling.to_display(x, 0)
        assert 0 <= dx < scaling.display.width
        assert scaling.to_model(dx, 0)[0] == x
    for y in range(scaling.model.height):
        _, dy = scaling.to_display(0, y)
        assert 0 <= dy < scaling.display.height
        assert scaling.to_model(0, dy)[1] == y


def test_exact_centre_values() -> None:
    half = Scaling(Size(2048, 1440), Size(1024, 720))
    # Model pixel 100 covers display pixels 200 and 201; the middle one by the integer rule is 200.
    assert half.to_display(100, 50) == (200, 100)
    assert half.to_display(0, 0) == (0, 0)
    assert half.to_display(1023, 719) == (2046, 1438)
    third = Scaling(Size(1000, 1000), Size(300, 300))
    # Model pixel 1 covers display pixels 4, 5, 6 (d * 300 // 1000 == 1): the centre is 5.
    assert preimage(1, 300, 1000) == [4, 5, 6]
    assert third.to_display(1, 1) == (5, 5)
    assert third.to_display(299, 0) == (expected_display(299, 300, 1000), 1)


@given(scalings(), st.data())
@LIGHT
def test_out_of_range_model_points_raise(scaling: Scaling, data: st.DataObject) -> None:
    w, h = scaling.model
    x, y = data.draw(
        st.one_of(
            st.tuples(st.integers(max_value=-1), st.integers(0, h - 1)),
            st.tuples(st.integers(0, w - 1), st.integers(max_value=-1)),
            st.tuples(st.integers(min_value=w), st.integers(0, h - 1)),
            st.tuples(st.integers(0, w - 1), st.integers(min_value=h)),
            st.tuples(st.integers(min_value=w), st.integers(min_value=h)),
        ),
        label="point",
    )
    with pytest.raises(OutOfRange) as info:
        scaling.to_display(x, y)
    assert str(info.value) == f"point ({x}, {y}) is outside the {scaling.model} screenshot"


@pytest.mark.parametrize("point", [(-1, 0), (0, -1), (2048, 0), (0, 1440), (5000, 5000)])
def test_out_of_range_display_points_raise(point: tuple[int, int]) -> None:
    scaling = Scaling(Size(2048, 1440), Size(1024, 720))
    with pytest.raises(OutOfRange) as info:
        scaling.to_model(*point)
    assert str(info.value) == f"point ({point[0]}, {point[1]}) is outside the 2048x1440 display"
    assert isinstance(info.value, ValueError)


def test_identity_mapping() -> None:
    size = Size(1024, 720)
    identity = Scaling.identity(size)
    assert identity.is_identity and identity.display == identity.model == size
    for point in [(0, 0), (1023, 719), (512, 360), (1, 718)]:
        assert identity.to_display(*point) == point
        assert identity.to_model(*point) == point
    with pytest.raises(OutOfRange):
        identity.to_display(1024, 0)
    with pytest.raises(OutOfRange):
        identity.to_model(0, 720)


# ---------------------------------------------------------------------------------------------------
# Parsing through a Scaling: coordinates arrive in model space and leave in display space
# ---------------------------------------------------------------------------------------------------
HALF = Scaling(Size(2048, 1440), Size(1024, 720))


def test_openai_click_is_mapped_to_display_space() -> None:
    action = parse_openai({"type": "click", "x": 100, "y": 50}, HALF)
    assert action.point == (expected_display(100, 1024, 2048), expected_display(50, 720, 1440)) == (200, 100)


def test_openai_drag_path_is_mapped_point_by_point() -> None:
    action = parse_openai(
        {"type": "drag", "path": [{"x": 0, "y": 0}, {"x": 511, "y": 300}, {"x": 1023, "y": 719}]}, HALF
    )
    assert action.path == ((0, 0), (1022, 600), (2046, 1438))


def test_anthropic_coordinates_are_mapped() -> None:
    assert parse_anthropic("left_click", {"coordinate": [100, 50]}, HALF).point == (200, 100)
    drag = parse_anthropic("left_click_drag", {"start_coordinate": [1, 2], "coordinate": [3, 4]}, HALF)
    assert drag.path == ((2, 4), (6, 8))


def test_model_space_edge_is_refused_even_though_the_display_is_larger() -> None:
    # (1024, 0) is on the 2048-wide display but outside the 1024-wide screenshot the model saw.
    with pytest.raises(ActionError) as info:
        parse_openai({"type": "click", "x": 1024, "y": 0}, HALF)
    assert info.value.code == "outside_screen"
    assert info.value.reason == "point (1024, 0) is outside the 1024x720 screenshot"
    with pytest.raises(ActionError) as info:
        parse_anthropic("mouse_move", {"coordinate": [0, 720]}, HALF)
    assert info.value.code == "outside_screen"


@pytest.mark.parametrize(
    ("scaling", "region", "expected"),
    [
        (Scaling.identity(Size(1024, 720)), [0, 0, 1024, 720], (0, 0, 1024, 720)),
        (Scaling.identity(Size(1024, 720)), [10, 20, 30, 40], (10, 20, 30, 40)),
        (HALF, [0, 0, 1024, 720], (0, 0, 2048, 1440)),  # the whole screenshot is the whole display
        (HALF, [10, 10, 11, 11], (20, 20, 22, 22)),  # one model pixel is 2x2 display pixels
        (Scaling(Size(1000, 1000), Size(300, 300)), [1, 1, 2, 2], (4, 4, 7, 7)),
    ],
)
def test_zoom_region_covers_the_display_pixels_of_the_model_region(
    scaling: Scaling, region: list[int], expected: tuple[int, int, int, int]
) -> None:
    action = parse_anthropic("zoom", {"region": region}, scaling)
    assert action == Action(Kind.ZOOM, region=expected)


@given(scalings(), st.data())
@PROPERTY
def test_zoom_region_property(scaling: Scaling, data: st.DataObject) -> None:
    w, h = scaling.model
    x0 = data.draw(st.integers(0, w - 1), label="x0")
    x1 = data.draw(st.integers(x0 + 1, w), label="x1")
    y0 = data.draw(st.integers(0, h - 1), label="y0")
    y1 = data.draw(st.integers(y0 + 1, h), label="y1")
    action = parse_anthropic("zoom", {"region": [x0, y0, x1, y1]}, scaling)
    assert action.region is not None
    dx0, dy0, dx1, dy1 = action.region
    # The region is exactly the display pixels whose model pixel lies inside [x0, x1) x [y0, y1).
    assert (dx0, dx1) == (preimage(x0, w, scaling.display.width)[0], preimage(x1 - 1, w, scaling.display.width)[-1] + 1)
    assert (dy0, dy1) == (
        preimage(y0, h, scaling.display.height)[0],
        preimage(y1 - 1, h, scaling.display.height)[-1] + 1,
    )
    assert 0 <= dx0 < dx1 <= scaling.display.width and 0 <= dy0 < dy1 <= scaling.display.height
