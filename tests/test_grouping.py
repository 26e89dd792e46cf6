"""When two requests are the same decision (core/grouping.py): the key, the screen around the target, and the
requests never grouped."""

from __future__ import annotations

from PIL import Image, ImageDraw

from cua_tui.core.actions import parse_openai
from cua_tui.core.fleet_queue import QueueItem, priority
from cua_tui.core.geometry import Scaling, Size
from cua_tui.core.grouping import Likeness, group_items, likeness
from cua_tui.core.policy import Policy
from cua_tui.core.ports import DecisionRequest, SafetyCheck

SCALE = Scaling(Size(1024, 720), Size(1024, 720))
POLICY = Policy.default().with_regions(
    [
        {"name": "buy", "x": 600, "y": 300, "width": 120, "height": 40},
        {"name": "send", "x": 600, "y": 500, "width": 120, "height": 40, "sends_out": True},
    ]
)


def screen(label: str = "Verify", caret: bool = False) -> Image.Image:
    img = Image.new("RGB", (1024, 720), (246, 247, 249))
    draw = ImageDraw.Draw(img)
    draw.rectangle((200, 160, 320, 204), fill=(37, 99, 235))
    draw.text((216, 172), label, fill=(255, 255, 255))
    if caret:
        draw.rectangle((240, 165, 241, 183), fill=(0, 0, 0))
    return img


def request(action: dict, kind: str = "action", **extra: object) -> DecisionRequest:
    return DecisionRequest("run", 1, 0, "c1", kind, "why", parse_openai(action, SCALE), **extra)  # type: ignore[arg-type]


def like(action: dict, rule: str = "actions.click", img: Image.Image | None = None) -> Likeness:
    return likeness(request(action), rule, 2, POLICY, None, img if img is not None else screen())


CLICK = {"type": "click", "x": 250, "y": 182}


def test_the_same_click_on_the_same_screen_is_the_same_decision_a_blinking_caret_aside() -> None:
    a, b = like(CLICK), like(CLICK, img=screen(caret=True))
    assert a.groupable and a.key == b.key and a.looks_like(b)
    assert a.target == "(250, 182)"


def test_another_label_at_the_target_or_another_point_is_another_decision() -> None:
    a = like(CLICK)
    assert not a.looks_like(like(CLICK, img=screen("Delete")))
    assert a.key != like({"type": "click", "x": 251, "y": 182}).key
    assert a.key != like(CLICK, rule="other.rule").key


def test_typing_differs_by_the_texts_sha256_and_lands_on_the_focused_field() -> None:
    typing = {"type": "type", "text": "hello"}
    a = likeness(request(typing), "actions.type", 1, POLICY, (250, 182), screen())
    b = likeness(request({"type": "type", "text": "hellO"}), "actions.type", 1, POLICY, (250, 182), screen())
    assert a.groupable and a.key != b.key and "hello" not in a.key
    assert a.target == "the focused field at (250, 182)"


def test_a_region_is_the_target_wherever_in_it_the_click_lands() -> None:
    a = like({"type": "click", "x": 610, "y": 310}, rule="regions.buy")
    b = like({"type": "click", "x": 700, "y": 330}, rule="regions.buy")
    assert a.key == b.key and a.looks_like(b) and a.target == "region 'buy'"


def test_never_grouped_safety_checks_budgets_and_regions_that_send_out() -> None:
    check = SafetyCheck("sc1", "malicious_instructions", "odd")
    asked = likeness(request(CLICK, kind="safety_check", safety_checks=(check,)), "", 0, POLICY, None, screen())
    assert "safety checks" in asked.alone and not asked.groupable
    budget = likeness(DecisionRequest("run", 1, 0, "", "budget", "spent"), "", 2, POLICY, None, screen())
    assert not budget.groupable
    sends = like({"type": "click", "x": 610, "y": 510}, rule="regions.send")
    assert "sends data out" in sends.alone
    assert not likeness(request(CLICK), "actions.click", 2, None, None, screen()).groupable
    assert not likeness(request(CLICK), "actions.click", 2, POLICY, None, None).groupable


def item(ticket: int, like: Likeness) -> QueueItem:
    req = request(CLICK)
    return QueueItem(ticket, f"task-{ticket}", f"run-{ticket}", req, priority(req, "actions.click"), ticket, 0, like)


def test_groups_keep_the_queues_order_and_leave_out_the_tickets_asked() -> None:
    same, other = like(CLICK), like(CLICK, img=screen("Delete"))
    items = [item(1, same), item(2, other), item(3, same), item(4, same)]
    groups = group_items(items)
    assert [g.tickets for g in groups] == [(1, 3, 4), (2,)]
    assert groups[0].id.startswith("g") and groups[0].id.endswith("-1")
    assert [g.tickets for g in group_items(items, frozenset({3}))] == [(1, 4), (2,), (3,)]


def test_replay_and_the_export_say_which_group_a_decision_was_answered_in() -> None:
    from cua_tui.core import events as ev
    from cua_tui.core.describe import group_for
    from cua_tui.core.ports import Answer

    def made(group: object) -> ev.DecisionMade:
        return ev.DecisionMade(1, 0, Answer.APPROVE, "human (fleet TUI)", group=group)  # type: ignore[arg-type]

    assert (
        group_for(made({"id": "g1a2b3c-17", "size": 12})) == "one of 12 runs answered with one key (group g1a2b3c-17)"
    )
    # a record no fleet writes (a hostile run directory) says nothing
    for hostile in (None, {"id": "g", "size": 0}, {"id": "x" * 65, "size": 2}, {"id": "g", "size": True}, ["g", 2]):
        assert group_for(made(hostile)) == ""
    # an id no fleet writes, a terminal escape in it, is never shown (the supervisor writes none such)
    assert group_for(made({"id": "\x1b[31mred", "size": 2})) == ""
