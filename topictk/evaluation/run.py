"""``topictk evaluate`` and ``topictk topics``: load a run directory and score or list it."""
from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from topictk import progress
from topictk.corpus.store import CorpusStore
from topictk.errors import (CheckpointError, CheckpointUsageError, OutOfMemoryError,
                            UsageError)
from topictk.evaluation.coherence import (gensim_coherence, parse_measures,
                                          quality_of_top_words, top_words)
from topictk.evaluation.left_to_right import left_to_right_perplexity
from topictk.inference.base import EvaluationSet
from topictk.inference.cluster import Cluster
from topictk.inference.perplexity import heldout_perplexity, train_heldout_perplexity
from topictk.inference.registry import get_driver, load_config
from topictk.limits import out_of_memory
from topictk.markers import RUN_FORMAT, RUN_MARKER, has_store_manifest, read_marker_file
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.guard import check_run_store
from topictk.rundir.layout import (MODEL_FILE, check_compatible, check_store_present,
                                   load_samples, retrain_command)
from topictk.streams import Streams


def _damaged_model_fix(run_dir: Path, checkpoint: int | None) -> str:
    """What to do when the final model (``checkpoint`` None) or checkpoint ``checkpoint`` of
    the run cannot be read."""
    steps = [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")]
    config = run_dir / "config.yaml"
    if checkpoint is None:
        if steps:   # train --resume ends by writing model.npz, even with nothing to train
            return (f"resume the run from its last checkpoint with 'topictk train --config "
                    f"{config} --resume', which writes it again, or pick a checkpoint with "
                    f"--checkpoint STEP (available: {', '.join(map(str, steps))})")
        return f"train the run again with {retrain_command(run_dir)}"
    others = [str(s) for s in steps if s != checkpoint]
    choices = []
    if others:
        choices.append(f"choose another step with --checkpoint (available: {', '.join(others)})")
    if (run_dir / MODEL_FILE).exists():
        choices.append("omit --checkpoint to use the final model")
    return " or ".join(choices) or f"train the run again with {retrain_command(run_dir)}"


def not_a_run_error(path: Path) -> UsageError:
    """Why ``path``, which holds no ``config.yaml``, is not a run directory: it does not
    exist, it is a file (of a run: then that run is named), a corpus store, or another
    folder."""
    train = "give the output directory of 'topictk train'"
    if not path.exists():
        return UsageError(f"{path}: does not exist; {train} (a folder holding config.yaml)")
    if path.is_file():
        if (path.parent / "config.yaml").is_file():
            return UsageError(f"{path}: is a file of the run directory {path.parent}; give "
                              f"the folder {path.parent}")
        return UsageError(f"{path}: is a file, not a run directory; {train}")
    marker = read_marker_file(path / RUN_MARKER, RUN_FORMAT)
    if marker is not None:
        # the marker is a run's first file: the run was stopped before it wrote its config
        config = marker.get("config_file") or "YOUR_CONFIG.yaml"
        return UsageError(f"{path}: a run stopped while starting, before it wrote config.yaml; "
                          f"it has nothing to read: train it again with 'topictk train "
                          f"--config {config} --out {path} --force'")
    if has_store_manifest(path):
        return UsageError(f"{path}: is a corpus store, not a run directory; train a run on "
                          f"it (corpus: {path} in the config of 'topictk train') and give "
                          f"that run's output directory")
    return UsageError(f"{path}: not a run directory (no config.yaml); {train}")


class _NoWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno != logging.WARNING


@contextmanager
def _training_warnings_shown_once():
    """Drop the warnings of config checks and driver set-up while a trained run is loaded:
    they concern its training settings (threads that cannot work on its chunks, a
    schedule that never updates a prior) and were shown when it was trained."""
    logger, quiet = logging.getLogger("topictk"), _NoWarnings()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


class LoadedRun:
    """A run directory's config, store, driver and state (final model or a checkpoint);
    ``fold_in``: score with this ``evaluation.fold_in`` instead of the run's own."""

    def __init__(self, run_dir: str | Path, checkpoint: int | None = None,
                 threads: int | None = None, fold_in: str | None = None):
        run_dir = Path(run_dir)
        config_path = run_dir / "config.yaml"
        if not config_path.exists():
            raise not_a_run_error(run_dir)
        self.run_dir = run_dir
        with _training_warnings_shown_once():
            self.config = load_config(config_path, [] if fold_in is None
                                      else [f"evaluation.fold_in={fold_in}"])
        if checkpoint is None:
            path = run_dir / MODEL_FILE
            if not path.exists():
                raise CheckpointError(f"{path}: no final model; the run has not finished. "
                                      f"Resume it with 'topictk train --resume', or pick a "
                                      f"checkpoint with --checkpoint STEP")
        else:
            path = ckpt.checkpoint_path(run_dir / "checkpoints", checkpoint)
            if not path.exists():
                have = [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")]
                raise CheckpointUsageError(f"{path}: no checkpoint at step {checkpoint}; "
                                           f"available: {', '.join(map(str, have)) or 'none'}")
        self.path = path
        self.checkpoint = checkpoint
        fix = _damaged_model_fix(run_dir, checkpoint)
        header, arrays = ckpt.load_arrays(path, fix)
        check_store_present(run_dir, self.config.corpus)
        self.store = CorpusStore.open(self.config.corpus)
        check_compatible(header, self.config, self.store, path)
        check_run_store(run_dir, self.store)
        threads = threads if threads is not None else self.config.training.threads
        self.streams = Streams.from_state(header["streams"])
        with _training_warnings_shown_once():
            self.driver = get_driver(self.config.inference.algorithm)(
                self.config, self.store, threads, streams=self.streams)
        try:
            self.state = self.driver.state_from_arrays(header["state"], arrays)
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"{path}: incomplete model ({exc}); {fix}") from None
        self.header = header
        self._training_fold_ins: dict[tuple, list] = {}

    def training_fold_in(self, *, sweeps: int = 50, burn_in: int = 25,
                         seed: int | None = None) -> list[tuple[int, np.ndarray]]:
        """(first document, theta) blocks of the training documents folded in with the topics
        fixed, as ``infer`` folds in new ones; made once per setting and kept, so that the
        readers of one run (the report's diagnostics, labels and documents) share it."""
        key = (sweeps, burn_in, seed)
        if key not in self._training_fold_ins:
            from topictk.evaluation.infer import infer_documents, training_documents

            docs, features = training_documents(self.store, self.driver)
            self._training_fold_ins[key] = list(infer_documents(
                self, docs, str(self.store.path), sweeps=sweeps, burn_in=burn_in, seed=seed,
                features=features))
        return self._training_fold_ins[key]

    def samples(self) -> list[dict]:
        return load_samples(self.run_dir, self.state.sample_steps)

    def topic_word(self):
        """The point estimate of the topics, (K, V), rows on the simplex (the bottom layer of
        a deep model)."""
        return self.driver.topic_word(self.state)


def evaluate_run(run_dir: str | Path, checkpoint: int | None = None,
                 threads: int | None = None, left_to_right: int | None = None, *,
                 scheduler: str | None = None, dask_workers: int | None = None,
                 coherence: Sequence[str] | str | None = None,
                 reference: str | Path | None = None, recompute: bool = False,
                 fold_in: str | None = None) -> dict:
    """Held-out perplexity averaged over the saved samples, coherence and diversity;
    ``left_to_right`` = R also scores the held-out tokens by the left-to-right estimator with R
    particles (§11.3). ``scheduler`` or ``dask_workers``: the fold-in of the test documents
    runs on that Dask cluster (same numbers). ``coherence``: also these of gensim's coherence
    measures (:data:`~topictk.evaluation.coherence.GENSIM_MEASURES`), on the training texts or
    on those of the store ``reference``. The scores are read from the run's ``scores.json``
    when it holds them for this model, store and protocol, and written there when computed
    (:mod:`topictk.evaluation.scores`); ``recompute`` scores again all the same.
    ``fold_in``: the estimator of theta (``evaluation.fold_in``) instead of the run's own; the
    cache keys on it, so another estimator's cached score is never shown for it."""
    measures = _coherence_request(coherence, reference)
    if reference is not None:
        CorpusStore.open(reference)         # a wrong path fails before the scoring starts
    run = LoadedRun(run_dir, checkpoint, threads, fold_in)
    try:
        with run_on_cluster(run, scheduler, dask_workers, "evaluated"):
            return evaluate_loaded(run, left_to_right, coherence=measures,
                                   reference=reference, recompute=recompute)
    except MemoryError:
        raise OutOfMemoryError(out_of_memory(
            f"{run.run_dir}: evaluating K = {run.config.model.topics}", None,
            "free memory and evaluate again, or evaluate on a machine with more")) from None


@contextmanager
def run_on_cluster(run: LoadedRun, scheduler: str | None, dask_workers: int | None,
                   what: str):
    """With ``scheduler`` or ``dask_workers``: the run's driver works on that Dask cluster
    while the block runs (the cluster is checked first, and a local one stopped after); a
    driver without cluster support is refused, naming those with it."""
    if scheduler is None and dask_workers is None:
        yield None
        return
    if not run.driver.traits.cluster_fold_in:
        from topictk.inference.registry import algorithm_names
        able = [n for n in algorithm_names() if get_driver(n).traits.cluster_fold_in]
        option = "--scheduler" if scheduler is not None else "--dask-workers"
        raise UsageError(f"{option}: {run.driver.name} runs are {what} on one machine; the "
                         f"algorithms whose runs are {what} on a Dask cluster: "
                         f"{', '.join(able)}")
    # the messages name the command's work and options, not training's config keys
    work = {"evaluated": "evaluating"}.get(what, "inferring")
    with Cluster(scheduler=scheduler, workers=dask_workers,
                 timeout=run.config.training.cluster_timeout, work=f"{work} {run.run_dir}",
                 options=("--scheduler", "--dask-workers")) as cluster:
        cluster.check_store(run.store)
        run.driver.use_cluster(cluster)
        yield cluster


def counted_perplexity(run: LoadedRun, test: EvaluationSet, samples: list[dict]) -> dict:
    """The held-out perplexity of the test documents (``heldout_perplexity``, pass 0), its
    fold-in counted on a progress bar: chunks of ``evaluation.chunk_docs`` documents, once
    per sample. A fold-in that counts no chunks (variational, deep LDA) fills it at the end."""
    chunks = -(-test.n_docs // int(run.config.evaluation.chunk_docs))
    with progress.bar(max(len(samples), 1) * chunks, desc="fold-in",
                      unit="chunk") as shown, progress.counting(shown):
        slices = run.store.slices("test")
        if slices is not None and test.rows is not None:
            slices = np.asarray(slices)[test.rows]
        ppl = heldout_perplexity(run.driver, run.state, test, samples, pass_index=0,
                                 slices=None if slices is None
                                 else (slices, list(run.store.time_slices)))
        shown.update(max(shown.total - shown.n, 0))
    return ppl


def _coherence_request(coherence: Sequence[str] | str | None,
                       reference: str | Path | None) -> tuple[str, ...] | None:
    """The gensim measures asked for (None: none); UsageError for an unknown name, or a
    reference corpus without measures."""
    if coherence is None:
        if reference is not None:
            raise UsageError("--reference names the texts of the coherence measures; add "
                             "--coherence c_v,c_npmi,c_uci,u_mass (or some of them)")
        return None
    try:
        return parse_measures(coherence)
    except ValueError as exc:
        raise UsageError(f"--coherence: {exc}") from None


def gensim_coherence_of(run: LoadedRun, top: np.ndarray, measures: Sequence[str],
                        reference: str | Path | None = None) -> dict:
    """The result fields of gensim's ``measures`` for the topics' top words ``top`` (K, n):
    the mean of each under its gensim name, and ``coherence`` (per topic values, the texts,
    their windows, and the top words absent from them)."""
    vocab = run.store.vocab
    topics = [[vocab[w] for w in words] for words in top]
    texts_store = run.store if reference is None else CorpusStore.open(reference)
    texts = texts_store.train()
    if texts.doc_ptr is None or texts.words is None:
        raise UsageError(f"{texts_store.path}: keeps no token order of its training documents; "
                         f"prepare it again with this version of topictk")
    found = gensim_coherence(topics, texts, texts_store.vocab, measures)
    result = dict(found["mean"])
    result["coherence"] = {"texts": "training" if reference is None else str(reference),
                           "top": int(top.shape[1]), "windows": found["windows"],
                           "per_topic": found["per_topic"], "absent_words": found["absent"]}
    return result


def evaluate_loaded(run: LoadedRun, left_to_right: int | None = None, *,
                    coherence: Sequence[str] | None = None,
                    reference: str | Path | None = None, recompute: bool = False,
                    cache: bool = True) -> dict:
    """What :func:`evaluate_run` returns, for a run already loaded: :func:`score_loaded` and
    gensim's coherence ``coherence`` measures, both from the run's scores cache unless
    ``cache`` is False or ``recompute``."""
    from topictk.evaluation.scores import run_scores

    if cache:
        result = run_scores(run.run_dir, run.config, run.checkpoint, left_to_right, loaded=run,
                            recompute=recompute)
        for extra in ("cached", "train_seconds", "status"):
            result.pop(extra, None)
    else:
        result = score_loaded(run, left_to_right)
    if coherence:
        ev, V = run.config.evaluation, run.driver.V
        n = min(max(ev.coherence_top, ev.diversity_top), V)
        ranked = run.driver.ranked_words(run.state, n)
        top = top_words(run.driver.topic_word(run.state), n) if ranked is None else ranked[0]
        top = top[:, :min(ev.coherence_top, V)]

        def compute(measures):
            return gensim_coherence_of(run, top, measures, reference)

        if cache:       # from the run's scores.json, as the held-out score
            from topictk.evaluation.coherence_cache import cached_coherence

            result.update(cached_coherence(run.run_dir, run.config, run.checkpoint,
                                           list(coherence), top.shape[1], reference, compute,
                                           recompute=recompute))
        else:
            result.update(compute(coherence))
    return result


def score_loaded(run: LoadedRun, left_to_right: int | None = None) -> dict:
    """The evaluate protocol on the store's full held-out set, for a run already loaded:
    held-out perplexity averaged over the saved samples (left-to-right too with
    ``left_to_right`` particles), UMass, NPMI and diversity. Every command that shows a
    run's score gets it from here, through the cache of :mod:`topictk.evaluation.scores`."""
    test = EvaluationSet.from_store(run.store)
    result = {"run": str(run.run_dir), "model": run.path.name,
              "algorithm": run.config.inference.algorithm, "topics": run.config.model.topics,
              "step": run.state.step,
              "estimator": run.driver.heldout_estimator(run.config)}
    samples = run.samples()
    if test.n_heldout_tokens:
        ppl = counted_perplexity(run, test, samples)
        result.update(ppl)
        result["samples"] = max(len(samples), 1)
        # deep LDA: the persistent test chain's sample count and the point perplexity (§8.11)
        if run.driver.traits.offers("evaluation"):
            result.update(run.driver.evaluation_report(run.state, test))
        if left_to_right is not None:
            result.update(left_to_right_perplexity(run.driver, run.state, test, samples,
                                                   left_to_right, run.streams,
                                                   run.driver.threads))
    else:
        result["perplexity"] = None
    result.update(train_heldout_perplexity(run.driver, run.state, run.store, samples))
    ev = run.config.evaluation
    train = run.store.train()
    V = run.driver.V
    n = min(max(ev.coherence_top, ev.diversity_top), V)
    ranked = run.driver.ranked_words(run.state, n)
    top = top_words(run.driver.topic_word(run.state), n) if ranked is None else ranked[0]
    result.update(quality_of_top_words(top, train.indptr, train.indices, V, ev.coherence_top,
                                       ev.diversity_top))
    return result
