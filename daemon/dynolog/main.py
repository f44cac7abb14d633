"""``dynolog`` entry point."""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from .config import parse_args
from .edge.servers import run


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
