"""``topictk train``: the run directory, resume, evaluation and checkpoint schedule, signals.

Run directory::

    config.yaml      the resolved config
    metrics.jsonl    one line per evaluation
    checkpoints/     step-NNNNNNNN.npz, the newest ``keep_checkpoints`` kept
    samples/         step-NNNNNNNN.npz, posterior samples saved for evaluation
    model.npz        the final state
"""
from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import yaml

from topictk._fileio import atomic_write_text
from topictk.config.loader import Config
from topictk.config.schema import SEED_KEYS
from topictk.corpus.store import CorpusStore
from topictk.errors import (
    CheckpointError,
    CheckpointUsageError,
    OutOfMemoryError,
    TopictkError,
    UsageError,
)
from topictk.inference.base import Driver, EvaluationSet
from topictk.inference.cluster import (
    Cluster,
    ClusterError,
    ClusterLost,
    WorkerLost,
    cluster_requested,
)
from topictk.inference.perplexity import heldout_perplexity, train_heldout_perplexity
from topictk.inference.registry import driver_class, load_config
from topictk.limits import json_loads, out_of_memory
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.guard import (check_run_output, is_run, prepare_run_dir, run_inputs,
                                  write_marker)
from topictk.rundir.layout import (MODEL_FILE, ReplacedRun, check_compatible,
                                   check_store_present, save_sample)
from topictk.rundir.lock import RunLock
from topictk.rundir.metrics import append_metrics, curve_rise, read_metrics, truncate_metrics
from topictk.streams import Streams
from topictk.training.loop import train_steps
from topictk.training.progress import Progress

log = logging.getLogger("topictk")

@dataclass
class TrainResult:
    run_dir: Path
    step: int
    status: str          # completed | interrupted | time_limit
    signal_name: str | None = None
    perplexity: float | None = None


class _StopFlag:
    """Turns SIGINT/SIGTERM into a request to stop after the current step."""

    def __init__(self):
        self.signal_name: str | None = None
        self._previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not in the main thread
                pass
        return self

    def _handle(self, signum, frame):
        if self.signal_name is not None:  # a second signal: stop now
            signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        return False


def _header(driver: Driver, store: CorpusStore, config: Config, state, streams: Streams,
            clock: dict, status: str) -> tuple[dict, dict]:
    state_header, arrays = driver.state_to_arrays(state)
    header = {"algorithm": driver.name, "family": driver.traits.family,
              "topics": int(config.model.topics), "vocabulary": store.n_words,
              "corpus_id": store.corpus_id, "state": state_header, "streams": streams.state(),
              "clock": clock, "status": status}
    return header, arrays


def curve_set(test: EvaluationSet, evaluation) -> EvaluationSet:
    """What the in-training curve scores: ``evaluation.curve_docs`` test documents with a
    fold-in of ``evaluation.curve_fold_in_sweeps`` (half of them burn-in); ``evaluate``
    scores every test document with the full fold-in."""
    sweeps = evaluation.curve_fold_in_sweeps
    return test.curve(evaluation.curve_docs, None if sweeps is None else (sweeps, sweeps // 2))


def _save_sample(run_dir: Path, driver: Driver, state, step: int) -> None:
    save_sample(run_dir, step, driver.sample(state))


# settings a resumed run may change without changing the chain it continues (the corpus and
# output paths may change too: the corpus is checked by its id, and a run may be moved)
RESUMABLE_CHANGES = frozenset({
    "inference.iterations", "training.threads", "training.time_limit",
    "training.checkpoint_every", "training.keep_checkpoints", "training.eval_every",
    "training.scheduler", "training.dask_workers", "training.cluster_timeout",
    "evaluation.curve_docs", "evaluation.curve_fold_in_sweeps", "evaluation.fold_in",
    "evaluation.fold_in_tol", "evaluation.fold_in_max_iterations"})
_PATHS = frozenset({"corpus", "output"})


def _flatten(data, prefix: str = "") -> dict:
    if not isinstance(data, dict):
        return {prefix: data}
    flat = {}
    for key, value in data.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def saved_settings(saved: Path) -> dict | None:
    """The settings a run saved in its config.yaml ``saved``, or None when the file cannot be
    read as a mapping."""
    try:
        data = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


# keys added to the schema after runs were saved whose defaults are what those runs did (no
# seed words; a DMR run's features from the store): absent from an older run's config.yaml,
# they are read as their defaults. Other added keys (inference.anneal_steps) changed the
# chain, and a run without them is refused.
NEUTRAL_WHEN_ABSENT = frozenset({*(f"model.{key}" for key in SEED_KEYS), "model.features",
                                 "model.spline_columns"})


def _with_defaults(saved: Path) -> dict:
    """The defaults of NEUTRAL_WHEN_ABSENT as the schema reads the run's saved config today;
    empty when the saved config no longer validates."""
    try:
        resolved = _flatten(load_config(saved).to_dict())
    except TopictkError:
        return {}
    return {key: value for key, value in resolved.items() if key in NEUTRAL_WHEN_ABSENT}


def check_resume_settings(saved: Path, config: Config, driver: Driver,
                          resumed: Config | None = None) -> None:
    """Refuse to resume under settings ``config`` that differ from the run's saved config,
    other than those a resumed run may change (RESUMABLE_CHANGES, less the driver's own
    ``fixed_on_resume``) and those the driver's resume rules put back to their saved value in
    ``resumed``: the run would continue a chain that neither config gives from the start, and
    some settings (priors, the seed) are part of the saved state and would not even apply."""
    before = saved_settings(saved)
    if before is None:
        return
    before = {**_with_defaults(saved), **_flatten(before)}
    after = _flatten(config.to_dict())
    kept = _flatten((resumed or config).to_dict())
    free = (RESUMABLE_CHANGES - driver.fixed_on_resume) | _PATHS
    changed = [f"{key} {before.get(key)!r} -> {after.get(key)!r}"
               for key in sorted(set(before) | set(after))
               if before.get(key) != after.get(key) and before.get(key) != kept.get(key)
               and key not in free and not _set_by_a_rule(key, before, after, kept)]
    if changed:
        allowed = ", ".join(sorted(RESUMABLE_CHANGES - driver.fixed_on_resume))
        raise UsageError(f"{saved}: --resume continues the run as it was configured, but these "
                         f"settings differ from it: {'; '.join(changed)}; resume with the run's "
                         f"settings (only {allowed} may change), or train into a new output")


def _set_by_a_rule(key: str, before: dict, after: dict, kept: dict) -> bool:
    """A key the saved config does not have (added to the schema since) that the driver's
    resume rules set to what the run did then (``kept``, not today's default ``after``)."""
    return key not in before and key in kept and kept[key] != after.get(key)


def saved_config_text(config: Config) -> str:
    """The run's ``config.yaml``: the resolved config, with ``output: .`` (the folder the file
    is in), so that a copied or moved run trains, resumes and is retrained where it is, never
    where it was first written. A corpus store inside the run (a continued run's union store)
    is named relatively too, so that it moves with the run."""
    data = config.to_dict()
    data["output"] = "."
    corpus, output = Path(config.corpus), Path(config.output)
    if output in corpus.parents:
        data["corpus"] = corpus.relative_to(output).as_posix()
    return yaml.safe_dump(data, sort_keys=False)


def check_sample_schedule(driver: Driver, state, start: int, saved: Path) -> None:
    """Refuse to resume when the samples the config schedules up to ``start`` are not those
    the run saved (SG-MCMC spreads its samples over the second half of the iterations, so
    changing ``inference.iterations`` moves them)."""
    expected = driver.scheduled_samples(start)
    taken = [s for s in state.sample_steps if s <= start]
    if expected is not None and expected != taken:
        raise UsageError(f"{saved}: with these settings {driver.name} collects its samples up to "
                         f"step {start} at steps {expected or 'none'}, but the run saved them at "
                         f"{taken or 'none'}; the samples depend on inference.iterations and "
                         f"inference.burn_in, so resume with the run's values or train a new "
                         f"run with the new ones (a run with inference.thin instead of "
                         f"inference.samples can be extended)")


def train(config: Config, *, resume: bool = False, force: bool = False,
          quiet: bool = False, callback: Callable[[dict], object] | None = None) -> TrainResult:
    """Train ``config`` to ``inference.iterations`` steps (or resume it there), holding the
    run directory's lock throughout: a second writer of the run is refused at once.
    ``callback(record)`` is given every metrics record as it is written
    (:meth:`RunSession._call_back`)."""
    check_run_output(config.output, resume=resume, force=force, inputs=run_inputs(config),
                     locked=False)
    with RunLock(config.output), ExitStack() as stack:
        if (resume and not ckpt.list_checkpoints(config.output / "checkpoints")
                and not (config.output / MODEL_FILE).exists() and is_run(config.output)):
            # stopped before its first checkpoint: nothing was kept, so it starts again from
            # step 0, the chain an uninterrupted run of the same config follows
            log.info("%s: no checkpoint yet; the run starts again from step 0", config.output)
            resume, force = False, True
        cluster = (stack.enter_context(Cluster.from_config(config.training))
                   if cluster_requested(config.training) else None)
        return _train(config, resume=resume, force=force, quiet=quiet, cluster=cluster,
                      callback=callback)


def _train(config: Config, *, resume: bool, force: bool, quiet: bool,
           cluster: Cluster | None = None,
           callback: Callable[[dict], object] | None = None) -> TrainResult:
    try:
        return RunSession(config, resume=resume, force=force, quiet=quiet,
                          cluster=cluster, callback=callback).run()
    except MemoryError:
        # the estimate passed (or could not be made) but an allocation failed: other programs
        # took the memory meanwhile, or an array the estimate does not count was too large
        fix = driver_class(config).MEMORY_FIX
        raise OutOfMemoryError(out_of_memory(
            f"{config.output}: training K = {config.model.topics}", config.memory_estimate,
            f"lower model.topics, {fix}, or free memory and train again (with --resume from "
            f"its last checkpoint, if it has one)")) from None


class RunSession:
    """One ``train`` of one run directory: opening it (the store, the run being replaced or
    resumed, the driver with its streams), the loop of steps with its evaluations, samples and
    checkpoints, and the final model. The steps themselves are the driver's
    (:func:`topictk.training.loop.train_steps`)."""

    def __init__(self, config: Config, *, resume: bool, force: bool, quiet: bool,
                 cluster: Cluster | None = None,
                 callback: Callable[[dict], object] | None = None):
        self.config, self.resume, self.quiet = config, resume, quiet
        self.callback, self.callback_error = callback, None
        self.training = config.training
        self.iterations = int(config.inference.iterations)
        self.run_dir = config.output
        if config.source is not None and os.path.realpath(config.source) == os.path.realpath(
                self.run_dir / "config.yaml"):
            check_store_present(config.source.parent, config.corpus)
        self.store = CorpusStore.open(config.corpus)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.metrics_path = self.run_dir / "metrics.jsonl"
        self.replace = prepare_run_dir(self.run_dir, config, self.store, resume=resume,
                                       force=force)
        self.saved = self._latest_checkpoint() if resume else None
        if self.saved:
            # the settings asked for, for check_resume_settings; the driver's resume rules may
            # put back what a setting meant when the run was trained (resume_config)
            self.resumed_settings = config
            self.config = config = driver_class(config).resume_config(
                config, self.saved[2], saved_settings(self.run_dir / "config.yaml") or {})
        self.streams = (Streams.from_state(self.saved[1]["streams"]) if self.saved
                        else Streams(self.training.seed))
        # the driver first: a config or corpus it refuses leaves the run being replaced intact
        self.driver = driver_class(config)(config, self.store, self.training.threads,
                                           streams=self.streams)
        self.store.verify()     # every array against its sha256: damage would train other topics
        if cluster is not None:     # every worker reads this store, before the first step
            cluster.check_store(self.store)
            self.driver.use_cluster(cluster)
        self.replaced: ReplacedRun | None = None
        self.status, self.last_ppl = "completed", None

    def _latest_checkpoint(self) -> tuple[Path, dict, dict]:
        found = ckpt.list_checkpoints(self.ckpt_dir)
        if not found:
            raise CheckpointUsageError(f"{self.ckpt_dir}: no checkpoint to resume from; train "
                                       f"without --resume")
        _, path = found[-1]
        header, arrays = ckpt.load_arrays(path, ckpt.RESUME_FIX)
        check_compatible(header, self.config, self.store, path)
        return path, header, arrays

    def run(self) -> TrainResult:
        # the run being replaced is moved aside, and removed once the new run has written its
        # first checkpoint (or its model); a failure before that puts it back
        self.replaced = ReplacedRun(self.run_dir) if self.replace else None
        try:
            self._start()
            step, signal_name = self._loop()
            if self.start >= self.iterations and not self.resume:
                self.status = "completed"
            if self.status != "interrupted":
                header, arrays = self._header(self.status)
                ckpt.save_arrays(self.run_dir / MODEL_FILE, header, arrays)
                rise = curve_rise(read_metrics(self.metrics_path))
                if rise is not None:
                    log.warning("%s: %s", self.config.shown["output"], rise)
            self._discard_replaced()        # a run with no checkpoint that completed
            if self.callback_error is not None:
                raise self.callback_error
            return TrainResult(run_dir=self.run_dir, step=step, status=self.status,
                               signal_name=signal_name, perplexity=self.last_ppl)
        except BaseException:
            if self.replaced is not None:
                self.replaced.restore()
            raise

    def _start(self) -> None:
        """The state to start from (the checkpoint's, or a new one), the run's files."""
        driver, run_dir = self.driver, self.run_dir
        if self.saved:
            path, header, arrays = self.saved
            check_resume_settings(run_dir / "config.yaml", self.resumed_settings, driver,
                                  self.config)
            try:
                self.state = driver.state_from_arrays(header["state"], arrays)
            except (KeyError, ValueError) as exc:
                raise CheckpointError(f"{path}: does not hold a complete {driver.name} state "
                                      f"({exc}); delete it to fall back to an earlier "
                                      f"one") from None
            try:
                driver.check_resumable(self.state)
            except ValueError as exc:
                raise CheckpointError(f"{path}: {exc}") from None
            check_sample_schedule(driver, self.state, int(header["state"]["step"]),
                                  run_dir / "config.yaml")
            self.clock = dict(header["clock"])
            self.start = int(header["state"]["step"])
            truncate_metrics(self.metrics_path, self.start)
            log.info("resuming %s from step %d (%s)", self.config.shown["output"], self.start,
                     path.name)
        else:
            self.state = driver.init_state()
            self.clock = {"train_seconds": 0.0, "tokens_seen": 0, "documents_seen": 0}
            self.start = 0
        run_dir.mkdir(parents=True, exist_ok=True)
        if not self.resume:
            write_marker(run_dir, self.store, self.config.source)
        atomic_write_text(run_dir / "config.yaml", saved_config_text(self.config))
        self.test = curve_set(EvaluationSet.from_store(self.store), self.config.evaluation)
        self.has_test = self.test.n_heldout_tokens > 0
        train_held = self.store.train_heldout()
        self.has_train_held = train_held is not None and train_held.n_tokens > 0

    def _loop(self) -> tuple[int, str | None]:
        """Steps from ``start`` to ``inference.iterations``, or until a signal or the time
        limit (which counts training seconds, evaluation excluded, like train_seconds)."""
        clock = self.clock
        progress = Progress(self.iterations, min(self.start, self.iterations), quiet=self.quiet)
        step = self.start
        # the clock after each step since the last checkpoint: a cluster lost in the middle of
        # a step rolls the state back to one of them
        self.clocks = {step: dict(clock)}
        with _StopFlag() as stop:
            try:
                step = self._steps(stop, progress)
            except (ClusterLost, WorkerLost) as exc:
                self._stop_without_cluster(exc)
        progress.close()
        return step, stop.signal_name

    def _stop_without_cluster(self, exc: ClusterError) -> None:
        """The cluster is gone (or loses workers step after step) in the middle of a step: a
        checkpoint of the last step whose whole state the driver holds, then the run stops
        with one line."""
        step = self.driver.roll_back(self.state)
        if step not in self.clocks:     # not after the last checkpoint: nothing newer to keep
            raise ClusterLost(f"{exc}; the run stopped; continue it with --resume, from its "
                              f"last checkpoint, on any cluster or none") from None
        self.clock.clear()
        self.clock.update(self.clocks[step])
        self.state.sample_steps[:] = [s for s in self.state.sample_steps if s <= step]
        self._write_checkpoint(step, "interrupted")
        raise ClusterLost(f"{exc}; the run stopped with a checkpoint of step {step}; continue "
                          f"it with --resume, on any cluster or none") from None

    def _steps(self, stop: _StopFlag, progress: Progress) -> int:
        """The steps, with their samples, evaluations and checkpoints; returns the last."""
        training, clock = self.training, self.clock
        step = self.start
        # a driver whose evaluation advances a chain of its own is evaluated on its
        # schedule only: an extra evaluation at the last step of a run that is later
        # extended (or stopped by the time limit) would move that chain
        off_schedule_ok = not self.driver.traits.persistent_evaluation
        for record in train_steps(self.driver, self.state, self.start, self.iterations):
            step = record.step
            clock["train_seconds"] += record.seconds
            clock["tokens_seen"] += record.info.tokens
            clock["documents_seen"] += record.info.documents
            if record.info.collect_sample:
                _save_sample(self.run_dir, self.driver, self.state, step)
                self.state.sample_steps.append(step)
            final = step == self.iterations
            if training.eval_every and (step % training.eval_every == 0
                                        or (final and off_schedule_ok)):
                self._evaluate(step, record.info.extra)
                progress.evaluated(step, self.last_ppl)
            progress.step()
            out_of_time = (training.time_limit is not None
                           and clock["train_seconds"] >= training.time_limit)
            if stop.signal_name or out_of_time or self.callback_error:
                self.status = ("interrupted" if stop.signal_name or self.callback_error
                               else "time_limit")
                if (out_of_time and training.eval_every and step % training.eval_every
                        and off_schedule_ok):
                    self._evaluate(step, record.info.extra)  # the last state's metrics
                self._write_checkpoint(step, self.status)
                break
            self.clocks[step] = dict(clock)
            if final or (training.checkpoint_every and step % training.checkpoint_every == 0):
                self._write_checkpoint(step, "completed" if final else "running")
        return step

    def _header(self, status: str) -> tuple[dict, dict]:
        return _header(self.driver, self.store, self.config, self.state, self.streams,
                       self.clock, status)

    def _discard_replaced(self) -> None:
        if self.replaced is not None:
            self.replaced.discard()
            self.replaced = None

    def _write_checkpoint(self, step: int, status: str) -> None:
        header, arrays = self._header(status)
        self.clocks = {step: dict(self.clock)}
        ckpt.save_arrays(ckpt.checkpoint_path(self.ckpt_dir, step), header, arrays)
        ckpt.prune_checkpoints(self.ckpt_dir, self.training.keep_checkpoints)
        self._discard_replaced()            # the new run can now be resumed

    def _evaluate(self, step: int, info_extra: dict) -> None:
        """One metrics line: point perplexities, the driver's objective, the step's extras."""
        driver, state, clock = self.driver, self.state, self.clock
        began = time.perf_counter()
        record = {"step": step, "tokens_seen": clock["tokens_seen"],
                  "documents_seen": clock["documents_seen"],
                  "train_seconds": round(clock["train_seconds"], 6)}
        if self.has_test:
            result = heldout_perplexity(driver, state, self.test, None, pass_index=step)
            record["perplexity_point"] = result["perplexity"]
            self.last_ppl = result["perplexity"]
        if self.has_train_held:      # Protocol B: the training documents' held-out tokens
            result = train_heldout_perplexity(driver, state, self.store, None)
            if result:
                record["perplexity_train_heldout_point"] = result["perplexity_train_heldout"]
                if not self.has_test:
                    self.last_ppl = result["perplexity_train_heldout"]
        if driver.traits.objective:
            record[driver.traits.objective] = driver.objective(state)
        record.update(info_extra)
        record["eval_seconds"] = round(time.perf_counter() - began, 6)
        append_metrics(self.metrics_path, record)
        if self.callback is not None:
            self._call_back(record)

    def _call_back(self, record: dict) -> None:
        """Give the caller's callback the record as metrics.jsonl holds it (a copy read back
        from its JSON). An exception the callback raises stops the run after this step as a
        signal does, with a checkpoint, and is raised again once that is written."""
        try:
            self.callback(json_loads(json.dumps(record, sort_keys=True)))
        except Exception as exc:
            self.callback_error = exc
