"""The Gibbs drivers hold one count representation (topictk/inference/gibbs/counts.py): the
config picks it, and the driver never asks which sampler it runs."""
from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from topictk.inference.gibbs import driver as gibbs
from topictk.inference.dmr.driver import DMRSEMDriver
from topictk.inference.gibbs.driver import GibbsDriver, counts_class
from topictk.inference.gibbs.counts import GibbsCounts, SparseLDACounts
from topictk.inference.gibbs.mh import MHCounts
from topictk.inference.gibbs.warp import WarpCounts


@pytest.mark.parametrize("sampler, sparse, topics, warp, want", [
    (None, True, 20, True, SparseLDACounts),
    (None, False, 20, True, SparseLDACounts),
    ("sparse", "auto", 20, True, SparseLDACounts),
    ("dense", True, 20, True, SparseLDACounts),
    ("mh", True, 20, True, MHCounts),
    ("warp", True, 20, True, WarpCounts),
    ("auto", True, gibbs.WARP_FROM_K - 1, True, SparseLDACounts),
    ("auto", True, gibbs.WARP_FROM_K, True, WarpCounts),
    ("auto", True, gibbs.WARP_FROM_K, False, SparseLDACounts),   # dmr-sem: no WarpLDA
    ("auto", True, gibbs.MH_FROM_K, False, MHCounts),
])
def test_the_config_picks_the_representation(sampler, sparse, topics, warp, want):
    assert counts_class({"sampler": sampler, "sparse": sparse}, topics, warp) is want


def test_every_representation_gives_the_whole_interface():
    for cls in (SparseLDACounts, MHCounts, WarpCounts):
        assert issubclass(cls, GibbsCounts) and not inspect.isabstract(cls), cls


def test_only_the_warp_chain_reads_a_checkpoint_without_dense_counts():
    dense, warp = {"z": 0, "ndk": 0, "nkw": 0, "nk": 0}, {"z": 0, "nk": 0}
    assert SparseLDACounts.reads(dense) and MHCounts.reads(dense)
    assert WarpCounts.reads(warp) and not WarpCounts.reads(dense)


def _driver_source(cls) -> ast.ClassDef:
    return ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]


@pytest.mark.parametrize("cls", [GibbsDriver, DMRSEMDriver])
def test_the_gibbs_drivers_ask_no_sampler(cls):
    """No attribute or name of a sampler (warp, mh, the representations and their parts) in
    the driver: what differs between samplers is the representation's."""
    tree = _driver_source(cls)
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"warp", "mh", "sampler", "WarpState", "MHSampler",
                        "WarpSampler", "SparseLDACounts", "MHCounts", "WarpCounts"}


def test_the_gibbs_driver_is_at_most_250_lines():
    lines, _ = inspect.getsourcelines(GibbsDriver)
    assert len(lines) <= 250
