"""One parse of each stylesheet for the whole test process, not one per App.

The suite starts a thousand Apps in a few processes; each parses the same CSS again (the App's, every
widget's default CSS, in the same theme), a sixth of a Pilot test's CPU time. Textual keeps the parsed
rules of a stylesheet in a cache of its own, per App, keyed by the CSS text and where it came from, and
reuses them as they are when it parses again; here that cache is shared by every App of the process,
keyed by the theme's variables too (the rules depend on them). What the Apps do is unchanged: the same
text with the same variables parses to the same rules. Only for the tests: the program starts one App.
"""

from __future__ import annotations

import inspect
from typing import Any

from textual.cache import LRUCache
from textual.css.stylesheet import Stylesheet

_SHARED: LRUCache[tuple[Any, ...], Any] = LRUCache(1024)
_EXPECTED = ["self", "css", "read_from", "is_default_rules", "tie_breaker", "scope"]


def share_parsed_css() -> None:
    """Share Textual's per-stylesheet parse cache across the process's Apps (once; a no-op after)."""
    parse = Stylesheet._parse_rules
    if getattr(parse, "shared", False):
        return
    # A Textual that parses otherwise is read as it is, not guessed at: the suite is only slower.
    if list(inspect.signature(parse).parameters) != _EXPECTED or not hasattr(Stylesheet(), "_variables"):
        return

    def _parse_rules(
        self: Stylesheet,
        css: str,
        read_from: Any,
        is_default_rules: bool = False,
        tie_breaker: int = 0,
        scope: str = "",
    ) -> Any:
        key = (css, read_from, is_default_rules, tie_breaker, scope, tuple(sorted(self._variables.items())))
        rules = _SHARED.get(key)
        if rules is None:
            rules = parse(self, css, read_from, is_default_rules, tie_breaker, scope)  # an error is not kept
            _SHARED[key] = rules
        return rules

    _parse_rules.shared = True  # type: ignore[attr-defined]
    Stylesheet._parse_rules = _parse_rules  # type: ignore[method-assign]
