"""Errors that reach the user as one line: what was wrong, where, and how to fix it.

The command line turns :class:`UsageError` subclasses into exit code 2 and every other
:class:`TopictkError` into exit code 1, printing only the message (no traceback unless
``--debug``).
"""
from __future__ import annotations


class TopictkError(Exception):
    """Base class for every error topictk reports to its user."""

    exit_code = 1


class UsageError(TopictkError):
    """The user asked for something that cannot work (bad option, bad config value)."""

    exit_code = 2


class ConfigError(UsageError):
    """An experiment configuration is invalid; the message names the YAML path and the file."""


class CorpusError(TopictkError):
    """Input text or a corpus store cannot be read, or does not match what was asked."""


class CorpusUsageError(CorpusError, UsageError):
    """The corpus given is not usable for the request (missing store, wrong model, empty input)."""

    exit_code = 2


class CheckpointError(TopictkError):
    """A checkpoint or saved model is missing, truncated, corrupt or belongs to another run."""


class CheckpointUsageError(CheckpointError, UsageError):
    """The checkpoint asked for does not exist (a step not kept, nothing to resume)."""

    exit_code = 2


class NumericalError(TopictkError):
    """A global parameter became NaN or infinite; the message names the update."""


class OutOfMemoryError(TopictkError):
    """An allocation failed: the message names the run or output, the memory the work was
    estimated to need and what was allowed, and what to change."""
