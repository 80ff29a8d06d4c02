"""Durations for `due`: `30m`, `4h`, `2d`, `1w`, `45s`, or ISO 8601 (`P2D`, `PT4H`, `P1DT2H30M`)."""

from __future__ import annotations

import re

_SHORT = re.compile(r"^(\d{1,6})\s*(s|m|h|d|w)$")
_ISO = re.compile(r"^P(?:(\d{1,6})W)?(?:(\d{1,6})D)?(?:T(?:(\d{1,6})H)?(?:(\d{1,6})M)?(?:(\d{1,6})S)?)?$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: object) -> int:
    """Seconds in a duration; ValueError with the expected forms otherwise."""
    if isinstance(text, bool) or not isinstance(text, str):
        raise ValueError("expected a duration such as 30m, 4h, 2d or P2D")
    value = text.strip()
    short = _SHORT.match(value)
    if short:
        seconds = int(short.group(1)) * _UNIT[short.group(2)]
    else:
        iso = _ISO.match(value)
        if not iso or value in ("P", "PT") or value.endswith("T"):
            raise ValueError(f"'{value}' is not a duration; expected e.g. 30m, 4h, 2d or P2D")
        w, d, h, m, s = (int(g) if g else 0 for g in iso.groups())
        seconds = w * 604800 + d * 86400 + h * 3600 + m * 60 + s
    if seconds <= 0:
        raise ValueError("a duration must be longer than zero")
    return seconds
