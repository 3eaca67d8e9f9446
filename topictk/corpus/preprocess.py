"""How text becomes tokens, chosen once by ``prepare`` and reapplied by ``infer``.

Order: match tokens (the default letter runs, or ``--token-pattern``), drop those shorter
than ``--min-length``, fold case (unless ``--case keep``), lemmatise (``--lemmatize LANG``),
join phrases (``--phrases``, learned on the training documents). Stop words are dropped
after that, when the vocabulary is chosen, so a phrase may hold one inside ("secretary the
navy") and a lemma that is a stop word ("was" -> "be") is dropped like the word itself.

The choices are recorded in the store's manifest under ``preprocessing``
(:meth:`Preprocessing.to_manifest`); :meth:`Preprocessing.of_store` reads them back, and a
store written before that section existed tokenises as it always did.
"""
from __future__ import annotations

import hashlib
import importlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from topictk.corpus import phrases as phrase_rules
from topictk.corpus.stopwords import ENGLISH_STOPWORDS
from topictk.corpus.text import pattern_tokens, tokenize
from topictk.errors import CorpusError, CorpusUsageError, UsageError

log = logging.getLogger("topictk")

CASES = ("fold", "keep")
EXTEND = "english+"          # --stopwords english+FILE: the built-in list and the file's
LEMMA_INSTALL = 'pip install "topictk[lemma]"'
SMALL_LIST = 50              # stop-word lists up to this size are written out in the manifest


def compile_token_pattern(pattern: str) -> re.Pattern:
    """``--token-pattern``: a Python regular expression whose matches are the tokens."""
    fix = "give a regular expression without capturing groups (write (?:...)) that matches " \
          "at least one character, e.g. '[^\\W\\d_]+'"
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--token-pattern {pattern!r}: not a regular expression ({exc}); "
                         f"{fix}") from None
    if compiled.groups:
        raise UsageError(f"--token-pattern {pattern!r}: has a capturing group, so its matches "
                         f"would not be whole tokens; {fix}")
    if any(m.end() == m.start() for m in compiled.finditer(" a A 1 _ - . é \n")):
        raise UsageError(f"--token-pattern {pattern!r}: matches the empty string; {fix}")
    return compiled


def _simplemma():
    try:
        return importlib.import_module("simplemma")
    except ImportError:
        raise UsageError(f"--lemmatize needs the simplemma package: {LEMMA_INSTALL}") from None


def lemmatizer_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("simplemma")
    except PackageNotFoundError:
        return "unknown"


def check_language(language: str) -> None:
    """Refuse a language simplemma has no dictionary for."""
    simplemma = _simplemma()
    try:
        simplemma.lemmatize("test", lang=language)
    except ValueError:
        raise UsageError(f"--lemmatize {language}: not a language simplemma knows; give an ISO "
                         f"639 code such as en, de, fr, es (see docs/prepare.md)") from None


# ---------------------------------------------------------------------------- stop words
def stopword_words(option: str | None, default_on: bool) -> frozenset[str]:
    """The stop words of ``--stopwords``: english, none, FILE (the file's words instead of
    the built-in list) or english+FILE (the built-in list and the file's words); None is
    the format's default (english for text)."""
    if option is None:
        return ENGLISH_STOPWORDS if default_on else frozenset()
    if option == "english":
        return ENGLISH_STOPWORDS
    if option == "none":
        return frozenset()
    if option.startswith(EXTEND):
        return ENGLISH_STOPWORDS | _read_stopword_file(option[len(EXTEND):])
    return _read_stopword_file(option)


def stopword_file(option: str | None) -> str | None:
    """The file named by ``--stopwords`` (FILE or english+FILE), if any."""
    if option in (None, "english", "none"):
        return None
    return option[len(EXTEND):] if option.startswith(EXTEND) else option


def _read_stopword_file(name: str) -> frozenset[str]:
    path = Path(name)
    what = "'english', 'none' or a file with one word per line"
    if not name:
        raise CorpusUsageError(f"--stopwords {EXTEND}: names no file; give {EXTEND}FILE")
    if path.is_dir():
        raise CorpusUsageError(f"--stopwords {path}: is a folder; give {what}")
    if not path.is_file():
        raise CorpusUsageError(f"{path}: stop-word file not found; give {what}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CorpusUsageError(f"{path}: stop-word file cannot be read "
                               f"({exc.strerror or exc}); give {what}") from None
    except UnicodeDecodeError:
        raise CorpusError(f"{path}: stop-word file is not valid UTF-8; convert it to "
                          f"UTF-8") from None
    return frozenset(w.strip().lower() for w in text.split())


def stopwords_record(option: str | None, words: frozenset[str], default_on: bool) -> dict:
    """The manifest's account of a stop-word list: what was asked, its size and hash (and
    the words themselves when the list is small)."""
    listed = "\n".join(sorted(words)) + "\n" if words else ""
    name = option or ("english" if default_on else "none")
    record = {"list": name, "size": len(words),
              "sha256": hashlib.sha256(listed.encode("utf-8")).hexdigest()}
    if 0 < len(words) <= SMALL_LIST:
        record["words"] = sorted(words)
    return record


# -------------------------------------------------------------------------- the settings
@dataclass
class Preprocessing:
    """Token pattern, case, minimum length, lemmatiser and phrases: text -> tokens."""

    token_pattern: str | None = None      # None: the letter runs of topictk.corpus.text
    case: str = "fold"
    min_length: int = 3
    lemmatize: str | None = None          # a simplemma language code
    phrases: list[tuple[str, ...]] = field(default_factory=list)
    _compiled: re.Pattern | None = field(default=None, repr=False)
    _lemmas: dict = field(default_factory=dict, repr=False)
    _joiner: phrase_rules.PhraseTable | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.token_pattern is not None:
            self._compiled = compile_token_pattern(self.token_pattern)
        if self.case not in CASES:
            raise UsageError(f"--case must be {' or '.join(CASES)}; got {self.case}")
        if self.lemmatize is not None:
            check_language(self.lemmatize)
        if self.phrases:
            self._joiner = phrase_rules.PhraseTable(self.phrases)

    def words(self, text: str) -> list[str]:
        """Tokens before phrases: matched, long enough, case folded, lemmatised."""
        fold = self.case == "fold"
        if self._compiled is None:
            tokens = tokenize(text, self.min_length, fold)
        else:
            tokens = pattern_tokens(text, self._compiled, self.min_length, fold)
        if self.lemmatize is not None:
            tokens = [self._lemma(t) for t in tokens]
        return tokens

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text``, phrases joined."""
        tokens = self.words(text)
        return self._joiner(tokens) if self._joiner is not None else tokens

    def _lemma(self, token: str) -> str:
        lemma = self._lemmas.get(token)
        if lemma is None:
            import simplemma
            lemma = simplemma.lemmatize(token, lang=self.lemmatize)
            if self.case == "fold":      # simplemma capitalises some lemmas (German nouns)
                lemma = lemma.lower()
            self._lemmas[token] = lemma
        return lemma

    # ------------------------------------------------------------------ the manifest
    def to_manifest(self, stopwords: dict, phrases: dict | None) -> dict:
        return {
            "token_pattern": self.token_pattern,
            "case": self.case,
            "min_length": self.min_length,
            "lemmatize": (None if self.lemmatize is None else
                          {"language": self.lemmatize, "lemmatizer": "simplemma",
                           "version": lemmatizer_version()}),
            "stopwords": stopwords,
            "phrases": phrases,
        }

    @classmethod
    def of_store(cls, manifest: dict, where: str) -> Preprocessing:
        """The settings a store was prepared with (a store older than the ``preprocessing``
        section: the letter runs of its ``min_length``, case folded)."""
        section = manifest.get("preprocessing")
        if section is None:
            return cls(min_length=int(manifest.get("options", {}).get("min_length", 3)))
        try:
            lemma = section.get("lemmatize")
            phrases = section.get("phrases") or {}
            language = lemma["language"] if lemma is not None else None
            if language is not None:
                _store_lemmatizer(lemma, where)
            return cls(token_pattern=section.get("token_pattern"),
                       case=section.get("case", "fold"),
                       min_length=int(section.get("min_length", 3)),
                       lemmatize=language,
                       phrases=[tuple(p["words"]) for p in phrases.get("list", [])])
        except (UsageError, TypeError, KeyError, ValueError, AttributeError) as exc:
            if isinstance(exc, _MissingLemmatizer):
                raise
            raise CorpusError(f"{where}: manifest.json's preprocessing section is damaged "
                              f"({' '.join(str(exc).split())[:200]}); prepare the corpus "
                              f"again with --force") from None


class _MissingLemmatizer(UsageError):
    """A lemmatised store read where simplemma is not installed."""


def _store_lemmatizer(record: dict, where: str) -> None:
    """Refuse a lemmatised store without simplemma; warn when the version differs."""
    try:
        _simplemma()
    except UsageError:
        raise _MissingLemmatizer(f"{where}: was prepared with --lemmatize, which needs the "
                                 f"simplemma package: {LEMMA_INSTALL}") from None
    if lemmatizer_version() != record.get("version"):
        log.warning("%s was lemmatised by simplemma %s; %s is installed, whose lemmas may "
                    "differ", where, record.get("version"), lemmatizer_version())
