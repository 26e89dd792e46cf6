"""The text grammars of open-weight computer-use models (DESIGN.md, "Open-weight models"): one record each,
by ``--grammar`` name, saying how its replies are read (a strict reader in this package), the image size
its processor keeps, and the space its coordinates are in. The prompts and the conversation are the
adapter's (agents/compat); reading what comes back is the core's, behind the trust boundary.

The facts and their sources: docs/open-weight.md (a table of each family, the repository and file
each fact was read from).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..actions import ActionError
from ..errors import UsageError
from ..geometry import Scaling, Size
from . import glm, opencua, toolcall, uitars
from .reply import Reply, ReplyError
from .resize import Resize
from .units import parse_unit

__all__ = ["GRAMMARS", "Grammar", "Reply", "ReplyError", "UnknownGrammar", "grammar_for", "parse_unit"]

Reader = Callable[..., Reply]


@dataclass(frozen=True, slots=True)
class Grammar:
    """One family's grammar: ``read`` (text, cursor) -> Reply; ``resize`` the processor's, whose output size is
    the size a screenshot is sent at; ``grid`` the side of its relative coordinate grid (None: pixels of the
    image sent); ``models`` the patterns of model names it is inferred from (lowercase, the name after its
    last "/")."""

    name: str
    family: str
    read_reply: Reader
    resize: Resize
    grid: int | None
    models: tuple[str, ...]
    source: str

    def read(self, text: Any, cursor: tuple[float, float] | None = None) -> Reply:
        """One reply; ``cursor``: where the model's last pointer action left the pointer (its space)."""
        try:
            reply = self.read_reply(text, cursor)
        except ReplyError:
            raise
        except ActionError as exc:  # a call the syntax reader refused: the reply cannot be read either
            raise ReplyError(exc.code, exc.reason) from None
        if reply.cursor is None:
            reply = replace(reply, cursor=_last_point(reply.units) or cursor)
        return reply

    def sizes(self, display: Size) -> tuple[Size, Scaling]:
        """The size a screenshot of ``display`` is sent at (one the processor keeps) and how the model's
        coordinates map to the display."""
        sent = self.resize(display)
        return sent, Scaling.grid(display, self.grid) if self.grid else Scaling(display, sent)

    @property
    def space(self) -> str:
        return f"0-{self.grid} grid" if self.grid else "pixels of the image sent"


def _last_point(units: tuple[dict[str, Any], ...]) -> tuple[float, float] | None:
    for item in reversed(units):
        point = item.get("to") if item.get("do") == "drag" else item.get("at")
        if isinstance(point, list) and len(point) == 2:
            return (point[0], point[1])
    return None


class UnknownGrammar(ValueError, UsageError):
    """A ``--grammar`` not registered, or a model whose grammar cannot be inferred: a usage error."""


QWEN25 = Resize(28, 3136, 12_845_056)
GRAMMARS: dict[str, Grammar] = {
    grammar.name: grammar
    for grammar in (
        Grammar("ui-tars", "UI-TARS-1.5", uitars.read, Resize(28, 100 * 28 * 28, 16384 * 28 * 28), None,
                (r"ui-?tars-?1\.5",), "bytedance/UI-TARS codes/ui_tars/action_parser.py, README_coordinates.md"),
        Grammar("ui-tars-v1", "UI-TARS v1 (2B/7B/72B SFT, DPO)", uitars.read, Resize(28, 3136, 2700 * 28 * 28), 1000,
                (r"ui-?tars-(?:2b|7b|72b)", r"ui-?tars-v1"), "bytedance/UI-TARS README_v1.md"),
        Grammar("qwen3", "Qwen3-VL", toolcall.read_qwen, Resize(32, 4 * 32 * 32, 16384 * 32 * 32), 1000,
                (r"qwen3-vl",), "QwenLM/Qwen3-VL cookbooks/utils/agent_function_call.py, computer_use.ipynb"),
        Grammar("qwen2.5", "Qwen2.5-VL", toolcall.read_qwen, QWEN25, None,
                (r"qwen2\.5-vl",), "QwenLM/Qwen2.5-VL cookbooks/computer_use.ipynb"),
        Grammar("fara", "Fara-7B", toolcall.read_fara, QWEN25, None,
                (r"fara-",), "microsoft/fara src/fara/_prompts.py, fara_agent.py"),
        Grammar("glm", "GLM-4.5V, GLM-4.1V-Thinking", glm.read, Resize(28, 112 * 112, 9_633_792 // 2), 999,
                (r"glm-4\.5v", r"glm-4\.1v"), "zai-org/GLM-V examples/gui-agent/glm-45v"),
        Grammar("opencua", "OpenCUA-7B, OpenCUA-32B", opencua.read, QWEN25, None,
                (r"opencua",), "xlang-ai/OpenCUA; OSWorld mm_agents/opencua"),
    )
}  # fmt: skip


def names() -> str:
    return ", ".join(GRAMMARS)


def grammar_for(model: str, named: str | None = None) -> tuple[Grammar, bool]:
    """The grammar ``--grammar`` names, else the one ``model``'s name is known by; and whether it was
    inferred. A model no pattern knows, without ``--grammar``, is an UnknownGrammar: never a default."""
    if named:
        found = GRAMMARS.get(named)
        if found is None:
            raise UnknownGrammar(f"unknown grammar {named[:40]!r}; use one of {names()}")
        return found, False
    short = model.strip().lower().rsplit("/", 1)[-1]
    for grammar in GRAMMARS.values():
        if any(re.search(pattern, short) for pattern in grammar.models):
            return grammar, True
    raise UnknownGrammar(f"no grammar is known for model {model[:80]!r}: give --grammar, one of {names()}")
