"""Fixtures of the end-to-end stack (see stack.py)."""

from .stack import stack, stack_db  # noqa: F401
