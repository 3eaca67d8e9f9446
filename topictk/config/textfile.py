"""Small text files a config or a command names (seed files, labels files), read whole, with
one-line errors."""
from __future__ import annotations

import os
import stat

from topictk.errors import ConfigError


def read_text_file(path, limit: int, kind: str, expected: str, missing: str = "") -> str:
    """The UTF-8 text of the small input file ``path`` (a seed file, a labels file). What
    cannot be read is a ConfigError in one line naming the file: larger than ``limit``
    bytes, missing, a folder, unreadable, or not UTF-8 (with the line of the first bad byte).
    ``kind`` names the file ("labels file"), ``expected`` what it holds ("topic<TAB>label
    lines"), ``missing`` adds to the fix for a missing file."""
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            raise IsADirectoryError(path)
        if os.stat(path).st_size > limit:
            raise ConfigError(f"{path}: larger than {limit >> 20} MB, not a {kind}; give a "
                              f"file of {expected}")
        with open(path, "rb") as f:
            data = f.read()
        return data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: {kind} not found; give a file of {expected}"
                          f"{missing}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder; give a {kind} ({expected})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc}); check its "
                          f"permissions") from None
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text; save the {kind} as UTF-8") from None
