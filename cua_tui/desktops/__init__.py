"""Desktop adapters, chosen by name. Vendor packages are imported only by the adapter that needs them."""

from __future__ import annotations

# Every backend the command line names (``--backend``). Here, importing nothing, so that ``--help``
# starts fast.
BACKENDS = ("local", "cwsandbox", "docker", "dry", "sim")
