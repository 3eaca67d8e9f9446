"""``python -m topictk`` is the ``topictk`` command."""
from __future__ import annotations

from topictk.cli import main

if __name__ == "__main__":
    main()
