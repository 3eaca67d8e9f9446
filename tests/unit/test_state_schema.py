"""The declared state layouts (topictk/state/schema.py): one writer and reader for every state,
shapes checked against the corpus and model, a newer layout or a missing field refused by
name, NaN saved as null, and files without a layout version read as version 1."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from topictk.state.counts import CountState
from topictk.state.deep import DeepState
from topictk.state.dmr import DMRCountState
from topictk.state.schema import SchemaError, from_arrays, to_arrays
from topictk.state.variational import VBState

SIZES = {"N": 7, "D": 2, "K": 3, "V": 4, "F": 2}


def count_state() -> CountState:
    rng = np.random.default_rng(0)
    return CountState(z=rng.integers(0, 3, 7).astype(np.int32),
                      ndk=rng.integers(0, 5, (2, 3)).astype(np.int32),
                      nkw=rng.integers(0, 5, (4, 3)).astype(np.int32),
                      nk=rng.integers(0, 9, 3).astype(np.int64),
                      alpha=np.array([0.1, 0.2, 0.3]), beta=0.01, sample_steps=[4, 8], step=9)


def test_round_trip_keeps_every_field_and_dtype():
    state = count_state()
    header, arrays = to_arrays(state)
    assert header == {"schema": 1, "beta": 0.01, "step": 9, "sample_steps": [4, 8]}
    json.dumps(header)                      # the header is saved as JSON
    back = from_arrays(CountState, header, arrays, SIZES)
    for name in ("z", "ndk", "nkw", "nk", "alpha"):
        assert getattr(back, name).dtype == getattr(state, name).dtype
        np.testing.assert_array_equal(getattr(back, name), getattr(state, name))
    assert (back.beta, back.step, back.sample_steps) == (0.01, 9, [4, 8])


def test_arrays_are_cast_to_the_declared_dtype():
    header, arrays = to_arrays(count_state())
    arrays["z"] = arrays["z"].astype(np.int64)
    assert from_arrays(CountState, header, arrays, SIZES).z.dtype == np.int32


def test_a_shape_that_does_not_fit_the_corpus_names_the_array_and_the_sizes():
    header, arrays = to_arrays(count_state())
    with pytest.raises(SchemaError, match=r"array ndk has shape \(2, 3\), expected \(2, 5\) "
                                          r"\(D, K\)"):
        from_arrays(CountState, header, arrays, {**SIZES, "K": 5})


@pytest.mark.parametrize("missing,message", [("nkw", "array nkw is missing"),
                                             ("beta", "header field beta is missing"),
                                             ("sample_steps", "header field sample_steps")])
def test_a_missing_field_is_named(missing, message):
    header, arrays = to_arrays(count_state())
    header.pop(missing, None)
    arrays.pop(missing, None)
    with pytest.raises(SchemaError, match=message):
        from_arrays(CountState, header, arrays, SIZES)


def test_a_newer_layout_is_refused_and_an_unversioned_one_read_as_version_1():
    header, arrays = to_arrays(count_state())
    with pytest.raises(SchemaError, match="header field schema is 2; this release reads "
                                          "CountState versions 1 to 1"):
        from_arrays(CountState, {**header, "schema": 2}, arrays, SIZES)
    del header["schema"]
    assert from_arrays(CountState, header, arrays, SIZES).step == 9


def test_nan_is_saved_as_null_and_read_back_as_nan():
    state = VBState(lam=np.ones((4, 3)), gamma=np.ones((2, 3)), alpha=np.ones(3), beta=0.1)
    header, arrays = to_arrays(state)
    assert header["bound"] is None and header["bound_prev"] is None
    back = from_arrays(VBState, json.loads(json.dumps(header)), arrays, SIZES)
    assert math.isnan(back.bound) and back.smoothed is True


def test_derived_fields_are_recomputed_not_saved():
    base = count_state()
    nu = np.array([[0.0, np.log(0.5)], [1.0, np.log(0.25)], [2.0, 0.0]])
    state = DMRCountState(z=base.z, ndk=base.ndk, nkw=base.nkw, nk=base.nk,
                          alpha=np.exp(nu[:, -1]), beta=0.01, nu=nu, optimizations=3)
    header, arrays = to_arrays(state)
    assert "alpha" not in arrays
    back = from_arrays(DMRCountState, header, arrays, SIZES)
    np.testing.assert_array_equal(back.alpha, [0.5, 0.25, 1.0])
    assert back.optimizations == 3


def test_lists_of_arrays_and_optional_arrays():
    layers = [3, 2]
    sizes = {"V": 4, "D": 2, "layers": layers, "rows": [4, 3], "top": 2, "all_topics": 5,
             "depth": 2, "test_docs": 1, "test_heldout": 6, "epoch_state": 5}
    state = DeepState(layers=layers, phi=[np.full((4, 3), 0.25), np.full((3, 2), 1 / 3)],
                      r=np.ones(2), theta_test=np.ones((1, 5)), c_test=np.ones((1, 2)),
                      racc=np.zeros(6), tacc=np.zeros(1))
    header, arrays = to_arrays(state)
    assert sorted(arrays) == ["c_test", "phi_1", "phi_2", "r", "racc", "tacc", "theta_test"]
    back = from_arrays(DeepState, header, arrays, sizes)
    assert back.M is None and back.theta_train is None and back.permutation is None
    np.testing.assert_array_equal(back.phi[1], state.phi[1])
    del arrays["phi_2"]
    with pytest.raises(SchemaError, match="array phi_2 is missing"):
        from_arrays(DeepState, header, arrays, sizes)


# ------------------------------------------------------------------------- migrations
def test_a_particle_em_state_of_version_1_is_migrated_to_one_weight_per_document():
    """PEM's version 1 kept one weight per particle (omega (P,)); the declared migration gives
    every document those weights, and the state reads as version 2."""
    from topictk.inference.variational.pem import PEMState
    from topictk.state.migrations import MIGRATIONS

    assert ("PEMState", 1) in MIGRATIONS and PEMState.SCHEMA_VERSION == 2
    sizes = {**SIZES, "P": 2}
    header = {"schema": 1, "bound": None, "bound_prev": None, "converged": False, "step": 3,
              "sample_steps": []}
    arrays = {"phi": np.full((4, 3), 0.25), "gamma": np.ones((2, 2, 3)),
              "alpha": np.full(3, 0.1), "omega": np.array([0.25, 0.75]),
              "particle_bounds": np.zeros(2)}
    state = from_arrays(PEMState, header, arrays, sizes)
    assert np.array_equal(state.omega, [[0.25, 0.75], [0.25, 0.75]])
    assert arrays["omega"].shape == (2,) and header["schema"] == 1     # inputs unchanged
    # a version-2 state is read as it is
    again = from_arrays(PEMState, {**header, "schema": 2}, {**arrays, "omega": state.omega},
                        sizes)
    assert np.array_equal(again.omega, state.omega)


def test_a_version_step_without_a_declared_migration_is_refused_by_name(monkeypatch):
    from topictk.state.migrations import MigrationError

    monkeypatch.setattr(CountState, "SCHEMA_VERSION", 2)
    header, arrays = to_arrays(count_state())
    with pytest.raises(MigrationError, match="header field schema is 1: no migration of "
                                             "CountState from version 1 to 2 is declared"):
        from_arrays(CountState, {**header, "schema": 1}, arrays, SIZES)


def test_migrations_go_one_version_up_and_are_declared_once():
    from topictk.state.migrations import migration

    with pytest.raises(ValueError, match="one version up"):
        migration("CountState", 1, 3)
    with pytest.raises(ValueError, match="two migrations from version 1"):
        migration("PEMState", 1, 2)(lambda header, arrays, sizes: (header, arrays))
