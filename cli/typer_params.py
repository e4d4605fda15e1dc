"""Typer (0.2x) checks each parameter's value with a pydantic TypeAdapter it builds, and builds one for
every parameter a verb has, given or not: `skyless status` alone paid ~0.1 s of CPU to import pydantic and
build a dozen adapters for flags nobody typed. Here each parameter's adapter is built when a value other
than its default arrives (then typer checks it exactly as before); a default of the annotation's own type
(`--limit`'s 50) is the code's value, passed as it is. A typer without this machinery is left alone.
"""

from __future__ import annotations

from typing import Any

try:
    from typer._click.core import Context, ParameterSource
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer.core import _TyperParameter

    DEFERRABLE = True
except ImportError:  # another typer: nothing to defer
    DEFERRABLE = False


def defer_adapters(command: Any) -> None:
    """Every parameter of `command` (a typer command or group), and of its subcommands, builds its adapter
    on use."""
    if not DEFERRABLE:
        return
    help_option = command.get_help_option(Context(command))  # else made, and checked, on first use
    for param in [*getattr(command, "params", ()), help_option]:
        if isinstance(param, _TyperParameter) and param._runtime_param is None:
            descriptor = param.type_descriptor
            param._runtime_param = _BuiltOnUse(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )
    for sub in getattr(command, "commands", {}).values():
        defer_adapters(sub)


if DEFERRABLE:

    class _BuiltOnUse(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            by_default = ctx.get_parameter_source(param.name) is ParameterSource.DEFAULT
            if by_default and type(value) is self.annotation:
                return value
            param._runtime_param = built = build_runtime_param(param.type_descriptor)
            return built._coerce_value(value, param=param, ctx=ctx)
