"""Start-up cost of a ``court`` command: typer without pydantic where a value needs no converting.

typer (0.29) converts every parameter's value through a pydantic ``TypeAdapter`` built when the command
runs, so each command loaded pydantic (0.1-0.2 s, more than gRPC and rich together) even when every
value already had its type: a string option left at its default, a ``--plain`` flag, or the automatic
``--help`` flag, whose value is ``None`` when not given. ``ready_values_skip_pydantic`` makes the
parameters typed ``str``, ``bool``, ``int`` or ``float`` hand over a value that already has exactly
that type as it is (what pydantic would return for it), and build typer's own converter, pydantic
included, for any other value, so a typed ``--limit 5`` or a bad ``--limit x`` is converted and
refused as before. Other annotations (lists, paths, choices, files) are typer's own from the start.

It touches one method of typer's parameter class; if typer no longer has it, nothing is changed (and
tests/cli/test_startup.py, which checks that `court whoami` does not import pydantic, says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCALARS = (str, bool, int, float)


def ready_values_skip_pydantic() -> None:
    try:
        from typer import core
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:  # pragma: no cover - another typer: its own conversion, unchanged
        return
    param_cls: Any = getattr(core, "_TyperParameter", None)
    if (
        param_cls is None
        or not hasattr(param_cls, "get_runtime_param")
        or getattr(param_cls, "_court_ready", False)
    ):
        return

    @dataclass(frozen=True)
    class Ready(RuntimeParam):
        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if type(value) is self.annotation:  # a default, argv's string for a str, a flag's bool
                return value
            return build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            d = self.type_descriptor
            if d.annotation in SCALARS and d.file_annotation is None and not d.is_choice:
                self._runtime_param = Ready(d.parameter_info, d.annotation, d)
            else:
                self._runtime_param = build_runtime_param(d)
        return self._runtime_param

    param_cls.get_runtime_param = get_runtime_param
    param_cls._court_ready = True
