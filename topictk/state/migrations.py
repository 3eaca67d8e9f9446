"""Declared migrations of saved states: how a checkpoint written by an older layout of a state
class (an older ``SCHEMA_VERSION``) is read by this release.

A migration is registered per state kind (the state class's name) and version step::

    @migration("PEMState", 1, 2)
    def _pem_weights_per_document(header, arrays, sizes):
        ...
        return header, arrays

:func:`migrate` applies the steps from the saved version up to the class's current one, in
order, before :func:`topictk.state.schema.from_arrays` checks the fields against the
declared layout; a version step without a migration is refused by name. Each migration gets
the saved header and arrays and the sizes of the corpus and model (symbol -> int, as the
shapes use them) and returns the header and arrays of the next version; it must not change
its inputs. How a resumed run's *settings* are put back is the driver's own business
(:meth:`topictk.inference.base.Driver.resume_config`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

Arrays = Mapping[str, np.ndarray]
Step = Callable[[dict, Arrays, Mapping[str, Any]], "tuple[dict, dict]"]


@dataclass(frozen=True)
class Migration:
    """One version step of one state kind: ``apply(header, arrays, sizes)`` turns a state
    saved as ``from_version`` into one of ``from_version + 1``."""

    kind: str
    from_version: int
    to_version: int
    apply: Step


#: (state kind, from_version) -> its migration
MIGRATIONS: dict[tuple[str, int], Migration] = {}


class MigrationError(ValueError):
    """A saved state whose version no declared migration leads from."""


def migration(kind: str, from_version: int, to_version: int) -> Callable[[Step], Step]:
    """Decorator: declare ``function`` as the migration of state ``kind`` from
    ``from_version`` to ``to_version`` (the next version; one step at a time)."""
    if to_version != from_version + 1:
        raise ValueError(f"a migration of {kind} goes one version up, not {from_version} -> "
                         f"{to_version}")

    def declare(function: Step) -> Step:
        key = (kind, from_version)
        if key in MIGRATIONS:
            raise ValueError(f"{kind} has two migrations from version {from_version}")
        MIGRATIONS[key] = Migration(kind, from_version, to_version, function)
        return function
    return declare


def migrate(kind: str, version: int, current: int, header: dict, arrays: Arrays,
            sizes: Mapping[str, Any]) -> tuple[dict, Arrays]:
    """The header and arrays of a ``kind`` state saved as ``version``, brought up to version
    ``current`` by the declared migrations (unchanged when it already is)."""
    while version < current:
        step = MIGRATIONS.get((kind, version))
        if step is None:
            raise MigrationError(f"header field schema is {version}: no migration of {kind} "
                                 f"from version {version} to {version + 1} is declared")
        header, arrays = step.apply(dict(header), dict(arrays), sizes)
        version = step.to_version
        header["schema"] = version
    return header, arrays


# --------------------------------------------------------------------- the declared steps
@migration("PEMState", 1, 2)
def _pem_weights_per_document(header: dict, arrays: dict, sizes: Mapping[str, Any]):
    """Particle EM version 1 kept one weight per particle for the whole corpus (``omega``
    (P,)); version 2 keeps one per document and particle (D, P). Every document starts from
    the corpus weights: they enter no later update, and scoring uses phi and alpha."""
    omega = arrays.get("omega")
    if omega is not None and np.ndim(omega) == 1:
        arrays["omega"] = np.tile(omega, (int(sizes["D"]), 1))
    return header, arrays
