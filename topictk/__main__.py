"""``python -m topictk`` and the ``topictk`` script.

Ctrl-C while the command line is still being imported (NumPy, SciPy and the kernels take
about a second) exits 130 with one line, as it does once a command runs; the command line
module is imported only after that handler is in place.
"""
from __future__ import annotations

import os
import signal


def _interrupted_while_starting(signum, frame) -> None:
    os.write(2, b"topictk: interrupted\n")
    os._exit(130)


def main() -> None:
    previous = signal.signal(signal.SIGINT, _interrupted_while_starting)
    from topictk.cli import main as run_command

    signal.signal(signal.SIGINT, previous)
    run_command()


if __name__ == "__main__":
    main()
