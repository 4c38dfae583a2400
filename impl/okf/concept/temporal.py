"""The two temporal profiles (spec/okf/contract/read.md §2): value validity, ``as_of`` parsing and echo, staleness.

``date-3fcbb9f`` uses calendar dates ``YYYY-MM-DD``; ``instant-0b87c52`` uses offset-bearing
RFC 3339 datetimes compared to the nanosecond. ``generated.at``, ``verified[].at`` and
``timestamp`` are RFC 3339 in both profiles. Pure functions only.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from knowspec.generated.constants import (
    TEMPORAL_PROFILE_DATE as DATE_PROFILE,
    TEMPORAL_PROFILE_INSTANT as INSTANT_PROFILE,
)
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.parsing.typed import is_date_like

_DATE = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})$")
_DATETIME = re.compile(
    r"^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|[+-]([0-9]{2}):([0-9]{2}))$"
)
_MAX_DATETIME_CHARS = 1 << 20


def parse_date(text: Any) -> date | None:
    """Go ``time.Parse("2006-01-02")`` that also re-formats to itself."""
    if not isinstance(text, str):
        return None
    m = _DATE.match(text)
    if not m:
        return None
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


@dataclass(frozen=True, order=True)
class Instant:
    """An exact instant: seconds since the epoch (UTC) and nanoseconds; ``offset`` in minutes."""

    seconds: int
    nanos: int
    offset: int = 0


def parse_rfc3339(text: Any, *, strict_offset: bool = False) -> Instant | None:
    """Go ``time.RFC3339`` parse (uppercase ``T``/``Z``, fraction allowed, no leap second).

    ``strict_offset`` adds the instant-profile rules: length ≥ 20 and ≤ 1 MiB, and no ``-00:00``.
    """
    if not isinstance(text, str) or len(text) > _MAX_DATETIME_CHARS:
        return None
    if strict_offset and (len(text) < 20 or text.endswith("-00:00")):
        return None
    m = _DATETIME.match(text)
    if not m:
        return None
    year, month, day, hour, minute, second = map(int, m.groups()[:6])
    if hour > 23 or minute > 59 or second > 59:
        return None
    try:
        date(year, month, day)
    except ValueError:
        return None
    offset = 0
    if m.group(8) != "Z":
        oh, om = int(m.group(9)), int(m.group(10))
        if oh > 23 or om > 59:
            return None
        offset = (oh * 60 + om) * (-1 if m.group(8)[0] == "-" else 1)
    frac = (m.group(7) or ".")[1:]
    nanos = int((frac + "000000000")[:9]) if frac else 0
    seconds = calendar.timegm((year, month, day, hour, minute, second)) - offset * 60
    return Instant(seconds, nanos, offset)


def parse_offset_datetime(text: Any) -> Instant | None:
    return parse_rfc3339(text, strict_offset=True)


def format_rfc3339_nano(instant: Instant, original: str) -> str:
    """Go ``RFC3339Nano`` of the parsed value: original wall clock and offset, fraction trimmed,
    a zero offset printed as ``Z``."""
    head = original[:19]
    frac = f"{instant.nanos:09d}".rstrip("0")
    zone = "Z" if instant.offset == 0 else original[-6:]
    return head + (f".{frac}" if frac else "") + zone


def value_valid(value: Any, profile: str) -> bool:
    """Validity of a profile-governed scalar (stale_after, last_modified, window ends)."""
    if not is_date_like(value):
        return False
    text = str(value)
    if profile == INSTANT_PROFILE:
        return parse_offset_datetime(text) is not None
    return len(text) == 10 and parse_date(text) is not None


@dataclass(frozen=True)
class AsOf:
    """A validated ``as_of``: ``echo`` is the response text, ``key`` compares with values."""

    profile: str
    echo: str
    day: date | None = None
    instant: Instant | None = None


def parse_as_of(value: str | None, profile: str) -> AsOf | None:
    """Handler-level ``as_of`` check; ``invalid_request`` with the contract message."""
    if value is None:
        return None
    if profile == INSTANT_PROFILE:
        inst = parse_offset_datetime(value)
        if inst is None:
            raise ToolError("invalid_request", 'argument "as_of" must be an RFC3339 datetime with UTC offset')
        return AsOf(profile, format_rfc3339_nano(inst, value), instant=inst)
    day = parse_date(value)
    if day is None:
        raise ToolError("invalid_request", 'argument "as_of" must be YYYY-MM-DD')
    return AsOf(profile, value, day=day)


def is_stale(stale_after: str, as_of: AsOf) -> bool:
    """Inclusive boundary: stale iff as_of >= stale_after (date in UTC, or exact instant)."""
    if as_of.profile == INSTANT_PROFILE:
        boundary = parse_offset_datetime(stale_after)
        assert boundary is not None and as_of.instant is not None
        return (as_of.instant.seconds, as_of.instant.nanos) >= (boundary.seconds, boundary.nanos)
    boundary_day = parse_date(stale_after)
    assert boundary_day is not None and as_of.day is not None
    return as_of.day >= boundary_day
