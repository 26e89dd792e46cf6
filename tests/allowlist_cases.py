"""One table of allow-list entries, shared by the grammar's, the policy's and the proxy's tests: what a policy
file accepts must be exactly what the egress proxy accepts (cua_tui.core.allowlist)."""

from __future__ import annotations

# entry -> its normalized form (parsing the normalized form again gives it back)
GOOD: dict[str, str] = {
    "example.com": "example.com",
    "Example.COM.": "example.com",
    " example.com ": "example.com",
    "*.Example.org": "*.example.org",
    "*.a.b.example.org": "*.a.b.example.org",
    "example.com:8443": "example.com:8443",
    "example.com:0443": "example.com:443",
    "localhost": "localhost",
    "a-b.example": "a-b.example",
    "1.example": "1.example",  # the last label is not numeric: a name
    "0x7f.example": "0x7f.example",
    "xn--bcher-kva.example": "xn--bcher-kva.example",
    "127.0.0.1": "127.0.0.1",
    "10.0.0.1:8123": "10.0.0.1:8123",
    "255.255.255.255": "255.255.255.255",
    "::1": "[::1]",
    "[::1]": "[::1]",
    "[0:0::1]:8080": "[::1]:8080",
    "[2001:DB8::1]:443": "[2001:db8::1]:443",
    "::ffff:127.0.0.1": "[::ffff:127.0.0.1]",
    "a" * 63 + ".example": "a" * 63 + ".example",
}

BAD: list[str] = [
    # empty, or nothing but a wildcard
    "",
    "   ",
    ".",
    "*",
    "*.",
    "*.*.example.com",
    "**.example.com",
    "a.*.example.com",
    "foo*.example.com",
    # URLs, paths, user information
    "http://example.com",
    "example.com/path",
    "example.com?q",
    "example.com#x",
    "example.com\\x",
    "user@example.com",
    # ports
    "example.com:0",
    "example.com:65536",
    "example.com:http",
    "example.com:",
    ":80",
    "example.com:+80",
    "example.com:٨٠",  # Arabic-Indic digits are digits to str.isdigit, not to a URL parser
    # empty labels, bad characters, bad label shapes
    "a..b",
    ".example.com",
    "example..com.",
    "-example.com",
    "example-.com",
    "bad_host.com",
    "two words.com",
    "tab\there.com",
    "esc\x1b.com",
    "nul\x00.com",
    "exämple.com",
    "\u202eexample.com",
    "a" * 64 + ".com",
    "a." * 127 + "com",  # over 253 characters
    # numeric hosts that are IPv4 in some URL notation: only dotted quads are accepted
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0x7f.1",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "127.000.0.1",
    "127.0.0.01",
    "999.1.1.1",
    "1.2.3.4.5",
    "example.123",
    # wildcards on IP addresses
    "*.1",
    "*.127.0.0.1",
    "*.[::1]",
    # brackets and IPv6
    "[::1",
    "::1]",
    "[::1]]",
    "[[::1]]",
    "[::1]x",
    "[::1]:",
    "[::1]:99999",
    "a[b].com",
    "[example.com]",
    "[127.0.0.1]",
    "fe80::1%eth0",
    "[fe80::1%25eth0]",
    "1:2:3:4:5:6:7:8:9",
    ":::1",
]
