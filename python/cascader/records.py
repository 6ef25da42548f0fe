"""Records: a list of dataclass rows that prints as a table, writes CSV and becomes a DataFrame.

Reports (a compile's layers, a sweep's results, a benchmark's rows) are plain dataclasses so
scripts need nothing beyond the standard library; pandas is only imported by `to_pandas`.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import os
import types
import typing
from typing import Any, Iterable, TypeVar

T = TypeVar("T")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, tuple):
        return "x".join(str(v) for v in value)
    return str(value)


def _optional_int_fields(row_type: type) -> set[str]:
    """The fields annotated `int | None` (Optional[int]); none when the annotations do not resolve."""
    try:
        hints = typing.get_type_hints(row_type)
    except (NameError, TypeError):  # a name imported only for type checking
        return set()
    return {name for name, hint in hints.items()
            if typing.get_origin(hint) in (typing.Union, types.UnionType) and set(typing.get_args(hint)) == {int, type(None)}}


def _nullable_int(values: list[Any], optional_int: bool) -> bool:
    """Whether a column holds integers with gaps: some None, the rest ints (bools are not). A
    column of None only is one when its field is annotated `int | None`."""
    present = [v for v in values if v is not None]
    if len(present) == len(values):
        return False  # no gaps: pandas keeps ints as int64 already
    if not present:
        return optional_int
    return all(isinstance(v, int) and not isinstance(v, bool) for v in present)


class Records(list):
    """A list of dataclass instances of one type, with table, CSV and pandas views."""

    def __init__(self, rows: Iterable[T] = ()) -> None:
        super().__init__(rows)

    @property
    def columns(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self[0])] if self else []

    def to_dicts(self) -> list[dict[str, Any]]:
        return [dataclasses.asdict(r) for r in self]

    def to_pandas(self):
        """A pandas DataFrame, one row per record (needs pandas installed)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("to_pandas needs pandas: pip install pandas") from e
        frame = pd.DataFrame(self.to_dicts(), columns=self.columns or None)
        # pandas stores an int column with a None in it as float (3 -> 3.0, None -> NaN), which
        # reads as a measurement and loses exactness above 2**53: such a column becomes the
        # nullable integer dtype, built from the records' own values rather than the floats.
        optional_int = _optional_int_fields(type(self[0])) if self else set()
        for column in self.columns:
            values = [getattr(r, column) for r in self]
            if _nullable_int(values, column in optional_int):
                frame[column] = pd.array(values, dtype="Int64")
        return frame

    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        """The records as CSV (tuples written as "AxBxC"); written to `path` when given."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.to_dicts():
            writer.writerow(["" if v is None else "x".join(map(str, v)) if isinstance(v, tuple) else v
                             for v in row.values()])
        text = out.getvalue()
        if path is not None:
            with open(path, "w", newline="") as f:
                f.write(text)
        return text

    def table(self, columns: list[str] | None = None) -> str:
        """A fixed-width text table of `columns` (default: all)."""
        columns = columns or self.columns
        cells = [[_cell(getattr(r, c)) for c in columns] for r in self]
        # Numbers right-aligned, everything else left-aligned, by the column's values.
        numeric = [all(isinstance(getattr(r, c), (int, float, type(None))) and not isinstance(getattr(r, c), bool)
                       for r in self) for c in columns]
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
        lines = ["  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(columns, widths, numeric)).rstrip()]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(row, widths, numeric)).rstrip()
                  for row in cells]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        columns = self.columns
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(getattr(r, c)))}</td>" for c in columns) + "</tr>"
                       for r in self)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
