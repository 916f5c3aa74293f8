"""Fixtures of the end-to-end stack (see tests/ranking/stack.py)."""

from tests.ranking.stack import stack, stack_db  # noqa: F401
