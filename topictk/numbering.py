"""How topics are numbered wherever a person reads them: from 1.

Every command's output, the report page, the labels file and every export number topic
rows the same way: the model's row ``k`` (0-based, as in the NumPy arrays a run holds and the
``.npz`` exports carry) is topic ``k + 1``. Counting from 1 is what LDAvis and pyLDAvis
require (they treat 0 as "no topic"), so the report, its LDAvis export and the commands agree.
"""
from __future__ import annotations

FIRST_TOPIC = 1


def topic_number(k: int) -> int:
    """The number people read for the model's topic row ``k``."""
    return int(k) + FIRST_TOPIC


def topic_row(number: int, n_topics: int) -> int:
    """The model's row of topic ``number`` (as given to an option such as ``--topic``);
    ValueError, saying the valid range, when there is no such topic."""
    row = int(number) - FIRST_TOPIC
    if not 0 <= row < n_topics:
        raise ValueError(f"topic {number} does not exist: topics are numbered "
                         f"{FIRST_TOPIC} to {n_topics - 1 + FIRST_TOPIC}")
    return row


def topic_columns(n_topics: int) -> list[str]:
    """The names of one column per topic in a table (TSV header): ``topic_1`` ... ``topic_K``,
    the columns in the model's row order."""
    return [f"topic_{topic_number(k)}" for k in range(n_topics)]
