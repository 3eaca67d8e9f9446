"""Hypothesis profiles: ``ci`` (the default) runs a few hundred examples per property, ``long``
(``HYPOTHESIS_PROFILE=long``) runs LONG_EXAMPLES. Every property also has a ``*_long`` twin
marked slow that runs LONG_EXAMPLES whatever the profile (``pytest -m slow tests/properties``).
No example database is kept: a failure prints the example and the seed to reproduce it."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

LONG_EXAMPLES = 10_000

_COMMON = {"deadline": None, "database": None, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture]}
settings.register_profile("ci", max_examples=200, **_COMMON)
settings.register_profile("long", max_examples=LONG_EXAMPLES, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
