"""The documentation runner: every code block of README.md and docs/ runs (see README.md)."""
