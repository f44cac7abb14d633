"""Robust statistics per key, and the rule that turns slow intervals into one alarm. Pure: no I/O, no clock.

A name's baseline is the median of its last ``window`` per-call times, with the MAD (median absolute
deviation) as its noise: one outlier interval moves neither, where a mean and a standard deviation
would follow it. An interval is *slow* when it exceeds the baseline by the rule's fraction and also
stands out of the noise: ``noise_k`` MADs (scaled to a standard deviation), and the window's 90th
percentile (at most its second-largest value). The MAD describes the bulk; the percentile is for
heavy tails, where a name is several times its median in one interval of five (small CPU operators
on a busy host): the MAD never sees those, and three of them in a row would otherwise be an alarm.
``for_intervals`` slow intervals in a row raise one alarm. Slow intervals are held out of the
baseline until they either raise the alarm (then the baseline learns the new level, and the episode
ends when the name is no longer slow) or turn out to be noise (then they join it).

Judging is on the daemon's path for every report, for every judged name: the statistics are computed
from the window every ``REFRESH`` values (and at each alarm), and an interval is one comparison with
the cached limit. A baseline a few intervals old judges a level that moved by a few percent at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Sequence

MAD_SCALE = 1.4826  # MAD times this estimates the standard deviation of normal noise
TAIL_QUANTILE = 0.9
REFRESH = 8  # values between two computations of a baseline's statistics


@dataclass(frozen=True)
class Rule:
    slowdown: float  # 0.25: 25 % slower than the reference
    for_intervals: int  # slow intervals in a row before an alarm
    window: int = 30  # intervals in a baseline
    min_samples: int = 5  # a name's baseline needs this many intervals before it can alarm
    noise_k: float = 3.0  # and a slow interval must exceed the median by this many (scaled) MADs


class Reference(NamedTuple):
    """What a value is compared with: a median, its spread, and the window's upper tail. A tuple: one is
    made for every judged name every few reports."""

    median: float
    mad: float = 0.0
    tail: float = 0.0

    @classmethod
    def of(cls, values: Sequence[float]) -> Reference:
        ordered = sorted(values)
        n = len(ordered)
        center = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2  # the median, without sorting again
        # The MAD from the quartiles (half the interquartile range: exact for symmetric noise), one sort
        # instead of two: this runs for every judged name every few reports.
        upper = (3 * (n - 1)) // 4
        mad = (ordered[upper] - ordered[n - 1 - upper]) / 2
        # The tail is never the window's maximum: one spike while a baseline forms (a busy host, a
        # first call) would otherwise hide any slowdown up to its size until it leaves the window.
        return cls(center, mad, ordered[max(0, min(int(TAIL_QUANTILE * n), n - 2))])

    def threshold(self, rule: Rule) -> float:
        return max(
            self.median * (1 + rule.slowdown), self.median + rule.noise_k * MAD_SCALE * self.mad, self.tail
        )


@dataclass(frozen=True)
class Alarm:
    reference: Reference
    current: float
    intervals: int


class Streak:
    """Consecutive slow intervals; fires once per episode, which ends at the first interval not slow."""

    __slots__ = ("count", "fired")

    def __init__(self) -> None:
        self.count, self.fired = 0, False

    def update(self, slow: bool, rule: Rule) -> bool:
        if not slow:
            self.count, self.fired = 0, False
            return False
        self.count += 1
        if self.fired or self.count < rule.for_intervals:
            return False
        self.fired = True
        return True


class Series:
    """One key's baseline and streak; ``limit`` is the cached threshold (infinite until the baseline
    has ``min_samples`` values)."""

    __slots__ = ("_rule", "_stale", "held", "limit", "reference", "samples", "streak", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self.samples: List[float] = []  # in arrival order, the newest last; the window is the last ones
        self.held: List[float] = []  # slow values not yet in the baseline
        self.streak = Streak()
        self.reference: Optional[Reference] = None
        self.limit = float("inf")
        self._rule: Optional[Rule] = None
        self._stale = 0

    def observe(self, value: float, rule: Rule) -> Optional[Alarm]:
        if value <= self.limit and not self.streak.count and rule is self._rule:
            # The common case, kept to a few operations: no episode open, not slow.
            self.samples.append(value)
            self._stale += 1
            if self._stale >= REFRESH or self.reference is None:
                self._refresh(rule)
            return None
        if rule is not self._rule:
            self._refresh(rule)
        slow = value > self.limit
        reference = self.reference
        fired = self.streak.update(slow, rule)
        if slow and not self.streak.fired:
            self.held.append(value)
            return None
        # The episode ended (noise) or fired (a new level): what was held joins the baseline.
        self.samples += self.held
        self.samples.append(value)
        self.held.clear()
        self._refresh(rule)
        return Alarm(reference, value, self.streak.count) if fired and reference is not None else None

    def _refresh(self, rule: Rule) -> None:
        self._rule, self._stale = rule, 0
        del self.samples[: -self.window]  # appended to freely in between: trimmed here
        if len(self.samples) < rule.min_samples:
            self.reference, self.limit = None, float("inf")
            return
        self.reference = Reference.of(self.samples)
        self.limit = self.reference.threshold(rule)
