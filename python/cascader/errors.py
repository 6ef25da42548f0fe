"""Exceptions raised by cascader.

Every error cascader raises on purpose derives from :class:`CascaderError`. Errors raised by
the C++ core arrive as these same classes (the bindings translate them).
"""

from __future__ import annotations


class CascaderError(Exception):
    """Base class of every error cascader raises on purpose."""


class InvalidArgumentError(CascaderError, ValueError):
    """A value passed to cascader breaks a documented precondition."""


class ModelError(CascaderError, ValueError):
    """A TFLite model is corrupt, truncated, or uses something cascader cannot read."""


class BinaryError(CascaderError, ValueError):
    """An Ethos-U command stream or driver payload is malformed."""


class BudgetError(CascaderError):
    """A memory budget cannot be met. The message names the smallest budget that works."""


class InfeasibleError(BudgetError):
    """`cascader.compile` cannot fit the model into the SRAM budget it was given.

    ``minimum_sram`` is the smallest budget (bytes) that the same compile fits into.
    """

    def __init__(self, message: str, minimum_sram: int | None = None) -> None:
        super().__init__(message)
        self.minimum_sram = minimum_sram

    @classmethod
    def below(cls, least: int, budget: int, what: str, fix: str = "") -> "InfeasibleError":
        """The budget is below the `least` bytes `what` needs; the message names the fix (one
        wording everywhere, which the CLI rewrites into its own option)."""
        return cls(f"{what} needs at least {least:,} B of SRAM; the budget is {budget:,} B. "
                   f"Pass sram={least} or more{fix}", minimum_sram=least)


class UnsupportedError(CascaderError, ValueError):
    """The model uses something the NPU path cannot compile (an operator, a data type, a
    quantization); the message names it and why."""


class ReferenceCrashed(CascaderError):
    """TFLite's reference interpreter aborted (LiteRT's reference kernels end the process on
    some inputs, e.g. an int8 SOFTMAX whose input scale is too small for its fixed-point
    multiplier). It runs in a child process, so only that process ends; ``operator`` is the
    index of the operator that aborts it alone, when found, and ``opcode`` its type."""

    def __init__(self, message: str, operator: int | None = None, opcode: str | None = None) -> None:
        super().__init__(message)
        self.operator = operator
        self.opcode = opcode


def one_line(error: BaseException) -> str:
    """An exception as one line for a report: cascader's own by its message (it names what went
    wrong), any other with its type first (a KeyError's message alone is a bare number)."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    return text if isinstance(error, CascaderError) else f"{type(error).__name__}: {text}"
