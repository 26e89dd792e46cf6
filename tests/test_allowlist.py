"""The one allow-list grammar (cua_tui.core.allowlist): the policy file and the egress proxy both use it, so
what `policy --check` accepts is exactly what a run accepts."""

from __future__ import annotations

import json

import pytest
from allowlist_cases import BAD, GOOD
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_tui.core.allowlist import AllowList, AllowListError, canonical_host, parse_entry
from cua_tui.core.policy import Policy, PolicyError
from cua_tui.desktops import egress


def test_the_proxy_uses_the_core_grammar() -> None:
    assert egress.AllowList is AllowList


@pytest.mark.parametrize(("entry", "normalized"), GOOD.items(), ids=repr)
def test_good_entries_normalize_and_reparse_to_themselves(entry: str, normalized: str) -> None:
    assert parse_entry(entry).text == normalized
    again = parse_entry(normalized)
    assert again == parse_entry(entry)


@pytest.mark.parametrize("entry", BAD, ids=repr)
def test_bad_entries_are_refused_naming_the_entry(entry: str) -> None:
    with pytest.raises(AllowListError) as info:
        parse_entry(entry)
    assert info.value.entry == entry and repr(entry) in str(info.value)
    assert info.value.problem  # says what is wrong


def _policy_accepts(entry: str) -> bool:
    try:
        Policy.from_toml(f"[network]\nallow_domains = [{json.dumps(entry)}]\n")
    except PolicyError:
        return False
    return True


def _proxy_accepts(entry: str) -> bool:
    try:
        AllowList.parse([entry])
    except ValueError:
        return False
    return True


HOSTISH = st.text(alphabet="abcx019.-:[]*@/ _%\tä\x1b", max_size=24)


@settings(max_examples=400, deadline=None)
@given(st.one_of(HOSTISH, st.text(max_size=24), st.sampled_from([*GOOD, *BAD])))
def test_policy_check_accepts_exactly_what_the_proxy_accepts(entry: str) -> None:
    assert _policy_accepts(entry) == _proxy_accepts(entry)
    if _proxy_accepts(entry):
        normalized = parse_entry(entry).text
        assert parse_entry(normalized).text == normalized
        policy = Policy.from_toml(f"[network]\nallow_domains = [{json.dumps(entry)}]\n")
        assert policy.allow_domains == (normalized,)
        assert AllowList.parse(policy.allow_domains).entries == (normalized,)  # what the desktop builds


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789abcdefx.", min_size=1, max_size=20))
def test_a_numeric_last_label_is_a_canonical_dotted_quad_or_nothing(host: str) -> None:
    labels = host.rstrip(".").split(".")
    last = labels[-1]
    # as URL parsers read it: decimal digits, or 0x then hex digits ("0xx" is a name, not a number)
    numeric = last.isdigit() or (last.startswith("0x") and all(c in "0123456789abcdef" for c in last[2:]))
    try:
        canon, is_ip = canonical_host(host)
    except ValueError:
        return
    if numeric:
        assert is_ip
        parts = canon.split(".")
        assert len(parts) == 4 and all(p == str(int(p)) and int(p) <= 255 for p in parts)
        assert canon == host.rstrip(".")  # no other notation was read as this address
    else:
        assert not is_ip
