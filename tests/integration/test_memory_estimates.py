"""The memory check before training counts what a run of every algorithm really holds: each
algorithm, trained in a process of its own on a config whose arrays dominate (thousands of
topics on the example corpus, a few steps with an evaluation), grows its peak resident memory
by its estimate, give or take a third."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import yaml

from tests.integration._cli import REPO

# what the in-training evaluation runs with: a short fold-in of every test document
EVALUATION = {"fold_in_sweeps": 4, "fold_in_burn_in": 2, "curve_fold_in_sweeps": 4}
TRAINING = {"eval_every": 2, "checkpoint_every": 2}
SAMPLED = {"iterations": 2, "burn_in": 1, "thin": 1}
ESTEP = {"estep_max_iter": 3}
LOCAL = {"sweeps": 2, "local_burn_in": 1, "chunk_docs": 16}
DEEP_SG = {"iterations": 2, "burn_in": 1, "batch_size": 32, "local_burn_in": 2,
           "local_samples": 1, "point_perplexity": {"iterations": 2, "last": 1}}

# algorithm -> (model, inference): a few thousand topics, so that K x V (1,737 words),
# D x K (307 training documents), the (document, word) pairs x K of CVB (7,819 pairs) and the
# tokens x K (11,460) dwarf the interpreter
CASES = {
    "gibbs": ({"topics": 8000}, {**SAMPLED, "chunks": 2, "sampler": "sparse"}),
    "keyatm": ({"family": "keyatm", "topics": 8000,
                "seed_words": {"exceptions": ["exception", "raise"], "numbers": ["number"]}},
               {**SAMPLED, "chunks": 2}),
    "dmr-sem": ({"family": "dmr", "topics": 4000},
                {**SAMPLED, "chunks": 2, "optimize_burn_in": 0, "optimize_interval": 1}),
    "vb": ({"topics": 3000, "alpha": "auto"}, {"iterations": 2, **ESTEP}),
    "cvb": ({"topics": 1200}, {"iterations": 2, "check_every": 1, "chunks": 2}),
    "cvb0": ({"topics": 2000}, {"iterations": 2, "check_every": 1, "chunks": 2}),
    "pem": ({"topics": 4000}, {"iterations": 2, "particles": 2, **ESTEP}),
    "ovb": ({"topics": 4000}, {"iterations": 2, "batch_size": 64, **ESTEP}),
    "hsvg": ({"topics": 5000}, {"iterations": 2, "batch_size": 64, **LOCAL}),
    "sgrld": ({"topics": 4000}, {"iterations": 2, "burn_in": 1, "samples": 1,
                                 "batch_size": 64, **LOCAL}),
    "dmr-sgrld": ({"family": "dmr", "topics": 4000},
                  {"iterations": 2, "burn_in": 1, "samples": 1, "batch_size": 64, **LOCAL}),
    "tlasgr": ({"family": "dlda", "layers": [3000, 100]}, DEEP_SG),
    "tlfsgr": ({"family": "dlda", "layers": [3000, 100]}, DEEP_SG),
    "dlda-sgrld": ({"family": "dlda", "layers": [3000, 100]}, DEEP_SG),
    "dlda-gibbs": ({"family": "dlda", "layers": [3000, 100]},
                   {"iterations": 2, "burn_in": 1, "chunks": 4,
                    "point_perplexity": {"iterations": 2, "last": 1}}),
}

# cases named by their family, trained by another algorithm
ALGORITHM = {"keyatm": "gibbs"}


def config_of(algorithm: str, store, folder):
    """The config of ``algorithm``'s case, written into ``folder``."""
    model, inference = CASES[algorithm]
    if model.get("family") != "dlda":
        model = {"alpha": 0.1, "beta": 0.01, **model}
    data = {"corpus": str(store), "output": str(folder / "run"), "model": model,
            "inference": {"algorithm": ALGORITHM.get(algorithm, algorithm), **inference},
            "training": {"seed": 5, **TRAINING}, "evaluation": EVALUATION}
    path = folder / "exp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def measured(config) -> tuple[int, int]:
    """(the estimate, the growth of the peak resident memory) of training ``config`` in a
    process of its own: VmHWM after training less VmRSS before (not getrusage's ru_maxrss,
    which after vfork + exec keeps the peak of the process this one was started from)."""
    script = textwrap.dedent(f"""
        from topictk.inference.registry import load_config
        from topictk.training.run import train

        def status(field):
            with open("/proc/self/status") as f:
                return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field + ":"))

        config = load_config({str(config)!r})
        before = status("VmRSS")
        train(config, quiet=True)
        print(config.memory_estimate, status("VmHWM") - before)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    estimate, grown = map(int, out.split())
    return estimate, grown


# one algorithm of each way of counting runs by default (the others: pytest -m slow)
DEFAULT = ("vb", "cvb0", "pem", "ovb", "sgrld", "tlasgr", "dlda-gibbs", "keyatm")


@pytest.mark.parametrize("algorithm", [
    name if name in DEFAULT else pytest.param(name, marks=pytest.mark.slow) for name in CASES])
def test_the_estimate_is_close_to_the_memory_each_algorithm_grows_by(
        algorithm, example_store, meta_store, tmp_path):
    store = meta_store if algorithm.startswith("dmr") else example_store
    estimate, grown = measured(config_of(algorithm, store, tmp_path))
    print(f"{algorithm}: estimate {estimate / 2**20:.0f} MiB, grown {grown / 2**20:.0f} MiB, "
          f"ratio {grown / estimate:.2f}")
    assert estimate > 100 * 2**20
    assert 0.75 < grown / estimate < 1.33, (algorithm, estimate, grown)
