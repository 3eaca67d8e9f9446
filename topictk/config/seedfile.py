"""Seed words as a config gives them: ``model.seed_words`` (a mapping of labels to lists of
words) or ``model.seed_file`` (a file of the same mapping), checked and read here; the
inference layer maps them to vocabulary ids (:mod:`topictk.inference.seeds`).

A seed file is YAML (``.yaml``, ``.yml``: ``label: [word, ...]`` per topic) or text: one
topic per line, its label and then its words, separated by spaces or commas; a label with
spaces is written before a colon (``space flight: nasa orbit``). Lines starting with ``#``
and blank lines are skipped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from topictk._fileio import shown

from topictk.errors import ConfigError
from topictk.config.textfile import read_text_file
from topictk.limits import short, text_lines

MAX_SEED_FILE = 16 << 20        # bytes: a larger file is not a seed file
SEED_FIX = "give a mapping of labels to lists of words, e.g. {space: [nasa, orbit]}"


def check_seed_words(value: Any, key: str, where: str) -> dict[str, list[str]] | None:
    """``value`` as a mapping of non-empty labels to non-empty lists of words (strings without
    spaces), labels and words as given; None stays None. Raises ConfigError naming ``key``."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"{key} must be a non-empty mapping of labels to lists of words; got "
                          f"{short(value)}; {SEED_FIX} ({where})")
    out: dict[str, list[str]] = {}
    for label, words in value.items():
        if not isinstance(label, str) or not label.strip():
            raise ConfigError(f"{key}: label {short(label)} must be a non-empty string; "
                              f"{SEED_FIX} ({where})")
        if isinstance(words, str):
            words = words.replace(",", " ").split()
        if not isinstance(words, list) or not words:
            raise ConfigError(f"{key}.{label} must be a non-empty list of words; got "
                              f"{short(words)} ({where})")
        clean = []
        for word in words:
            if not isinstance(word, str) or not word.strip() or len(word.split()) != 1:
                raise ConfigError(f"{key}.{label}: {short(word)} is not a word (a string "
                                  f"without spaces); write each seed word as one token "
                                  f"({where})")
            if word.strip() not in clean:
                clean.append(word.strip())
        out[label] = clean
    return out


def read_seed_file(path: str | Path) -> dict[str, list[str]]:
    """The seed words of a seed file (module docstring). Raises ConfigError naming the file,
    and the line of a text file, for what cannot be read or is not a seed list."""
    path = Path(shown(path))
    text = read_text_file(path, MAX_SEED_FILE, "seed file", "'label word word ...' lines",
                          " (model.seed_file is relative to the config)")
    if path.suffix.lower() in (".yaml", ".yml"):
        from topictk.config.loader import DuplicateKeyError, _Loader   # (it reads this module)

        try:
            data = yaml.load(text, Loader=_Loader)
        except DuplicateKeyError as exc:
            raise ConfigError(f"{path}: {exc.problem}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"{path}{line}: invalid YAML "
                              f"({getattr(exc, 'problem', None) or 'unreadable'}); write "
                              f"'label: [word, word]' per topic") from None
        return check_seed_words(data, "seed file", str(path))
    seeds: dict[str, list[str]] = {}
    for number, line in enumerate(text_lines(text), start=1):
        body = line.strip()
        if not body or body.startswith("#"):
            continue
        if ":" in body:
            label, rest = body.split(":", 1)
        else:
            label, _, rest = body.replace(",", " ").partition(" ")
        label, words = label.strip(), rest.replace(",", " ").split()
        where = f"{path}:{number}"
        if not label:
            raise ConfigError(f"{where}: no label before the words; write 'label word word "
                              f"...'")
        if not words:
            raise ConfigError(f"{where}: label {short(label)} has no words; write 'label "
                              f"word word ...'")
        if label in seeds:
            raise ConfigError(f"{where}: label {short(label)} given twice; give each topic "
                              f"one line")
        seeds[label] = list(dict.fromkeys(words))
    if not seeds:
        raise ConfigError(f"{path}: no seed words; write one label and its words per line")
    return seeds
