"""cua-tui: supervise computer-use agents from the terminal."""

__version__ = "0.1.0"
