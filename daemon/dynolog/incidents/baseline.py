"""Robust statistics per key, and the rule that turns slow intervals into one alarm. Pure: no I/O, no clock.

A name's baseline is the median of its last ``window`` per-call times, with the MAD (median absolute
deviation) as its noise: one outlier interval moves neither, where a mean and a standard deviation
would follow it. An interval is *slow* when it exceeds the baseline by the rule's fraction and also
stands out of the noise (``noise_k`` MADs, scaled to a standard deviation); ``for_intervals`` slow
intervals in a row raise one alarm. Slow intervals are held out of the baseline until they either
raise the alarm (then the baseline learns the new level, and the episode ends when the name is no
longer slow) or turn out to be noise (then they join it).
"""

from __future__ import annotations

import bisect
import collections
import statistics
from dataclasses import dataclass, field
from typing import Deque, List, Optional, Sequence, Tuple

MAD_SCALE = 1.4826  # MAD times this estimates the standard deviation of normal noise


@dataclass(frozen=True)
class Rule:
    slowdown: float  # 0.25: 25 % slower than the reference
    for_intervals: int  # slow intervals in a row before an alarm
    window: int = 30  # intervals in a baseline
    min_samples: int = 5  # a name's baseline needs this many intervals before it can alarm
    noise_k: float = 3.0  # and a slow interval must exceed the median by this many (scaled) MADs


@dataclass(frozen=True)
class Reference:
    """What a value is compared with: a median and its spread."""

    median: float
    mad: float = 0.0

    @classmethod
    def of(cls, values: Sequence[float]) -> Reference:
        center = statistics.median(values)
        return cls(center, statistics.median(abs(v - center) for v in values))

    def threshold(self, rule: Rule) -> float:
        return max(self.median * (1 + rule.slowdown), self.median + rule.noise_k * MAD_SCALE * self.mad)


@dataclass(frozen=True)
class Alarm:
    reference: Reference
    current: float
    intervals: int


@dataclass
class Streak:
    """Consecutive slow intervals; fires once per episode, which ends at the first interval not slow."""

    count: int = 0
    fired: bool = False

    def update(self, slow: bool, rule: Rule) -> bool:
        if not slow:
            self.count, self.fired = 0, False
            return False
        self.count += 1
        if self.fired or self.count < rule.for_intervals:
            return False
        self.fired = True
        return True


@dataclass
class Series:
    """One key's baseline and streak. The window is also kept sorted, so that the median costs a lookup
    and the MAD is computed only for a value already past the slowdown threshold: judging a report is
    a few bisections per name, not a sort."""

    window: int
    samples: Deque[float] = field(init=False)  # in arrival order
    ordered: List[float] = field(default_factory=list)  # the same, sorted
    held: List[float] = field(default_factory=list)  # slow values not yet in the baseline
    streak: Streak = field(default_factory=Streak)

    def __post_init__(self) -> None:
        self.samples = collections.deque()

    def reference(self, rule: Rule) -> Optional[Reference]:
        return Reference.of(self.ordered) if len(self.ordered) >= rule.min_samples else None

    def observe(self, value: float, rule: Rule) -> Optional[Alarm]:
        slow, reference = self._judge(value, rule)
        fired = self.streak.update(slow, rule)
        if slow and not self.streak.fired:
            self.held.append(value)
            return None
        for held in self.held:
            self._add(held)
        self.held.clear()
        self._add(value)
        return Alarm(reference, value, self.streak.count) if fired and reference is not None else None

    def _judge(self, value: float, rule: Rule) -> Tuple[bool, Optional[Reference]]:
        n = len(self.ordered)
        if n < rule.min_samples:
            return False, None
        median = (self.ordered[(n - 1) // 2] + self.ordered[n // 2]) / 2
        if value <= median * (1 + rule.slowdown):
            return False, None  # the common case: the MAD is not needed
        reference = Reference.of(self.ordered)
        return value > reference.threshold(rule), reference

    def _add(self, value: float) -> None:
        self.samples.append(value)
        bisect.insort(self.ordered, value)
        if len(self.samples) > self.window:
            old = self.samples.popleft()
            del self.ordered[bisect.bisect_left(self.ordered, old)]
