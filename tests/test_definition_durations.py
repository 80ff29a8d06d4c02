"""Durations for `due`: short forms and ISO 8601, refused with the expected forms otherwise."""

from __future__ import annotations

import pytest

from studio.definition.durations import parse_duration


@pytest.mark.parametrize("text, seconds", [
    ("45s", 45), ("30m", 1800), ("4h", 14400), ("2d", 172800), ("1w", 604800), ("2 d", 172800), (" 4h ", 14400),
    ("P2D", 172800), ("PT4H", 14400), ("PT30M", 1800), ("PT90S", 90), ("P1W", 604800), ("P1DT2H30M", 95400),
    ("P1W2D", 777600), ("999999s", 999999),
])
def test_valid_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text, message", [
    ("2x", "'2x' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),
    ("1.5h", "'1.5h' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),
    ("P1M", "'P1M' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),  # months have no fixed length
    ("P1Y", "'P1Y' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),
    ("P", "'P' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),
    ("PT", "'PT' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),
    ("P2DT", "'P2DT' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),
    ("p2d", "'p2d' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),
    ("-2d", "'-2d' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),
    ("1234567s", "'1234567s' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),  # at most 6 digits
    ("", "'' is not a duration; expected e.g. 30m, 4h, 2d or P2D"),
    ("0m", "a duration must be longer than zero"),
    ("PT0S", "a duration must be longer than zero"),
    (5, "expected a duration such as 30m, 4h, 2d or P2D"),
    (True, "expected a duration such as 30m, 4h, 2d or P2D"),
    (None, "expected a duration such as 30m, 4h, 2d or P2D"),
])
def test_invalid_durations(text: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == message
