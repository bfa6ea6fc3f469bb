"""Arrow column values -> the Python values a row's extra fields are carried as, never losing a digit.

pyarrow's `to_pylist` turns a timestamp into a `datetime`, which holds microseconds and the years 1 to
9999: a `timestamp[ns]` with sub-microsecond values (what pandas writes by default) raises ValueError, a
timestamp past 9999 OverflowError, and so do `time64[ns]` and `duration[ns]`. Here every temporal value
becomes text at its own precision instead, computed from its integer (Howard Hinnant's `civil_from_days`
for the calendar, exact for every int64):

| Arrow type | text | e.g. |
|---|---|---|
| timestamp (no zone) | ISO-8601, the unit's digits | `2023-11-14T22:13:20.123456789` |
| timestamp (a zone) | the same in UTC, with `Z` (Arrow stores the instant in UTC) | `2023-11-14T22:13:20.123Z` |
| date32, date64 | ISO-8601 date | `2023-11-14` |
| time32, time64 | time of day | `22:13:20.123456789` |
| duration | ISO-8601 duration in seconds | `PT1.000000001S`, `-PT0.5S` |

A year outside 0000 to 9999 is written with a sign and six digits, as JavaScript's `toISOString` writes it
(`+010000-01-01T00:00:00Z`). Such text is a group or an id as it stands, and a time wherever
`summary.windows.epoch_seconds` reads ISO-8601; a duration or a time of day is no moment, and a time field
holding one is refused as a column (`column_time_problem`). Columns with no temporal values in them keep
`to_pylist`, the fast path.
"""

from __future__ import annotations

from collections.abc import Callable

from specaccept_cli.threads import signals_stay_with_main

with signals_stay_with_main():
    import pyarrow as pa

_UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_DAY_SECONDS = 86_400


def _is_temporal(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_timestamp(kind) or pa.types.is_date(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind)
    )


def _holds_temporal(kind: pa.DataType) -> bool:
    """Whether a type is temporal or holds a temporal type anywhere inside (a struct field, a list's values)."""
    if _is_temporal(kind):
        return True
    if pa.types.is_dictionary(kind):
        return _holds_temporal(kind.value_type)
    return any(_holds_temporal(kind.field(index).type) for index in range(kind.num_fields))


def python_values(array: pa.Array | pa.ChunkedArray) -> list[object]:
    """The values of an Arrow array as Python values, temporal ones as text at their own precision (see above)."""
    if isinstance(array, pa.ChunkedArray):
        return [value for chunk in array.chunks for value in python_values(chunk)]
    kind = array.type
    if not _holds_temporal(kind):
        values: list[object] = array.to_pylist()
        return values
    if _is_temporal(kind):
        return _temporal_text(array)
    if pa.types.is_dictionary(kind):
        return python_values(array.dictionary_decode())
    if pa.types.is_struct(kind):
        names = [kind.field(index).name for index in range(kind.num_fields)]
        children = [python_values(child) for child in array.flatten()]  # offset and the struct's nulls applied
        valid = array.is_valid().to_pylist()
        return [dict(zip(names, row)) if ok else None for ok, row in zip(valid, zip(*children, strict=True))]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        values = python_values(array.flatten())  # the values of the rows in view, null rows holding none
        if pa.types.is_fixed_size_list(kind):
            lengths: list[int | None] = [None if not ok else kind.list_size for ok in array.is_valid().to_pylist()]
        else:
            lengths = array.value_lengths().to_pylist()
        rows: list[object] = []
        start = 0
        for length in lengths:
            if length is None:
                rows.append(None)
                continue
            rows.append(values[start : start + length])
            start += length
        return rows
    if pa.types.is_map(kind):  # as `to_pylist` gives a map: a list of (key, value) pairs
        keys, items = python_values(array.keys), python_values(array.items)  # whole children: offsets index them
        offsets, valid = array.offsets.to_pylist(), array.is_valid().to_pylist()
        return [
            list(zip(keys[start:end], items[start:end])) if ok else None
            for ok, start, end in zip(valid, offsets, offsets[1:])
        ]
    if isinstance(array, pa.ExtensionArray):
        return python_values(array.storage)
    # A union (no Parquet file holds one; an engine's Arrow batch may): each value through its own type.
    return [
        None if not scalar.is_valid or scalar.value is None else python_values(pa.array([scalar.value]))[0]
        for scalar in array
    ]


def _temporal_text(array: pa.Array) -> list[object]:
    kind = array.type
    spell: Callable[[int], str]
    if pa.types.is_date32(kind):
        integers, spell = array.view(pa.int32()), _date_text
    elif pa.types.is_date64(kind):
        integers, spell = array.view(pa.int64()), lambda ms: _date_text(ms // (_DAY_SECONDS * 1000))
    elif pa.types.is_timestamp(kind):
        integers, spell = array.view(pa.int64()), _timestamp_speller(kind.unit, kind.tz is not None)
    elif pa.types.is_time(kind):
        width = pa.int32() if pa.types.is_time32(kind) else pa.int64()
        integers, spell = array.view(width), _time_speller(kind.unit)
    else:
        integers, spell = array.view(pa.int64()), _duration_speller(kind.unit)
    return [None if value is None else spell(value) for value in integers.to_pylist()]


def civil_date(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day counted from 1970-01-01, proleptic Gregorian (Hinnant's `civil_from_days`)."""
    shifted = days + 719_468
    era = shifted // 146_097
    day_of_era = shifted - era * 146_097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153  # March is 0
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    return year_of_era + era * 400 + (month <= 2), month, day


def _year_text(year: int) -> str:
    return f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):06d}"


def _date_text(days: int) -> str:
    year, month, day = civil_date(days)
    return f"{_year_text(year)}-{month:02d}-{day:02d}"


def _clock_text(seconds_of_day: int) -> str:
    hours, rest = divmod(seconds_of_day, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _fraction(value: int, digits: int) -> str:
    return f".{value:0{digits}d}" if digits else ""


def _timestamp_speller(unit: str, zoned: bool) -> Callable[[int], str]:
    digits = _UNIT_DIGITS[unit]
    per_second = 10**digits
    zone = "Z" if zoned else ""

    def spell(value: int) -> str:
        seconds, fraction = divmod(value, per_second)
        days, of_day = divmod(seconds, _DAY_SECONDS)
        return f"{_date_text(days)}T{_clock_text(of_day)}{_fraction(fraction, digits)}{zone}"

    return spell


def _time_speller(unit: str) -> Callable[[int], str]:
    digits = _UNIT_DIGITS[unit]

    def spell(value: int) -> str:
        seconds, fraction = divmod(value, 10**digits)
        return f"{_clock_text(seconds)}{_fraction(fraction, digits)}"

    return spell


def _duration_speller(unit: str) -> Callable[[int], str]:
    digits = _UNIT_DIGITS[unit]

    def spell(value: int) -> str:
        seconds, fraction = divmod(abs(value), 10**digits)
        return f"{'-' if value < 0 else ''}PT{seconds}{_fraction(fraction, digits)}S"

    return spell


def column_time_problem(name: str, kind: pa.DataType) -> str | None:
    """Why a column of this type cannot be a time field (a duration, a time of day), or None when it can."""
    if pa.types.is_duration(kind):
        what = "a length of time"
    elif pa.types.is_time(kind):
        what = "a time of day, with no date"
    else:
        return None
    return (
        f"column '{name}' is {kind}, {what}, not a moment: a time field needs a timestamp or date column, "
        "epoch numbers or ISO-8601 strings (or none, for windows of runs)"
    )
