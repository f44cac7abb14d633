"""The one way text from outside becomes an integer: ASCII decimal digits, nothing else.

``str.isdigit`` is true of '²', which ``int`` refuses, and of '٣', which it reads as 3; ``int`` takes '1_000',
' 1' and '+1', which no file name, label or variable we read means as a number. Checking with one and
converting with the other is how a hostile name or label turned into a traceback.
"""

from __future__ import annotations

from typing import Optional

# Python's own default bound on the digits int() reads (3.11, and 3.8.14 on): the same answer on every
# version, and no quadratic conversion of a megabyte of digits.
MAX_DIGITS = 4300


def strict_int(text: str, negative: bool = False) -> Optional[int]:
    """*text* as an integer when it is ASCII digits only (after one leading '-' where *negative*
    allows it); None for anything else, the empty text included."""
    digits = text[1:] if negative and text.startswith("-") else text
    if len(digits) > MAX_DIGITS or not (digits.isascii() and digits.isdigit()):
        return None
    return int(text)
