"""The analyser's units and numpy's arithmetic, so that a figure agrees with its to the last bit:
microseconds as a float64 column holds them, milliseconds from those, numpy's rounding and pairwise
sums, and datetimes in Asia/Shanghai wall time (its fixed choice), ``%Y-%m-%d %H:%M:%S:%f``."""

from __future__ import annotations

import datetime
import math
from typing import Sequence

SHANGHAI = datetime.timezone(datetime.timedelta(hours=8))
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def us(ns: int) -> float:
    """Microseconds as the analyser holds them: numpy divides an int64 column as float64, so the
    nanoseconds are rounded to a float first (its sums, differences and datetimes round the same way)."""
    return float(ns) / 1000


def np_round(value: float, digits: int) -> float:
    """Rounded as numpy and pandas round (scale, round half to even, scale back), which differs from
    Python's round() at a decimal 5 that binary holds a little above or below."""
    scale = 10**digits
    return round(value * scale) / scale


def np_sum(values: Sequence[float]) -> float:
    """Summed in numpy's order (pairwise: eight running sums over blocks of up to 128, halves above), so
    that a mean agrees with numpy's to the last bit."""
    n = len(values)
    if n < 8:
        return sum(values, 0.0)
    if n > 128:
        half = n // 2 - (n // 2) % 8
        return np_sum(values[:half]) + np_sum(values[half:])
    lanes = list(values[:8])
    whole = n - n % 8
    for i in range(8, whole, 8):
        for j in range(8):
            lanes[j] += values[i + j]
    total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
    return sum(values[whole:], total)


def np_mean(values: Sequence[float]) -> float:
    return np_sum(values) / len(values)


def ms(ns: int) -> float:
    """Milliseconds as the analyser's millisecond columns hold them: its microseconds over 1000."""
    return us(ns) / 1000


def ms_between(start_ns: int, end_ns: int) -> float:
    return (us(end_ns) - us(start_ns)) / 1000


def when(ns: int, form: str = "%Y-%m-%d %H:%M:%S:%f") -> str:
    """The analyser's datetime: Shanghai time of the whole microsecond, microseconds after a colon."""
    moment = EPOCH + datetime.timedelta(microseconds=math.floor(us(ns)))
    return moment.astimezone(SHANGHAI).strftime(form)
