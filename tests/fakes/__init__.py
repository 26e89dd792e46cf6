"""Test doubles the tests and the benchmarks drive, kept out of the shipped package (as python-tuf keeps its
repository simulator in its tests): the local CoreWeave Sandboxes service, its container mode and its direct
data plane. Nothing under ``cua_tui`` imports them (an import-linter contract in pyproject.toml)."""
