"""topictk from Python: load a trained run, read its topics and proportions, score it, fold new
documents in; open and prepare corpus stores.

Everything here gives the numbers the commands give: :meth:`Run.evaluate` is
``topictk evaluate --json``, :meth:`Run.infer` is ``topictk infer``, :func:`prepare` is
``topictk prepare``. The compiled kernels are imported when a run is loaded, not when
:mod:`topictk` is.

Examples
--------
>>> import topictk
>>> run = topictk.load_run("runs/gibbs")               # doctest: +SKIP
>>> phi = run.topic_word()                             # (K, V), rows sum to 1
>>> theta = run.infer(["a new document about python lists and loops"])
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Run", "coherence", "compare_runs", "fold_in", "intrusion_precision", "load_run",
           "open_store", "prepare", "score_topic_word", "train"]


def load_run(path: str | Path, checkpoint: int | None = None, *,
             threads: int | None = None) -> Run:
    """Open the run directory written by ``topictk train``.

    Parameters
    ----------
    path : str or Path
        The run directory (the ``output`` of its config).
    checkpoint : int, optional
        Load the checkpoint of this step instead of the final model.
    threads : int, optional
        Threads for scoring and fold-in (default: the run's ``training.threads``); the
        numbers do not depend on it.

    Returns
    -------
    Run

    Raises
    ------
    topictk.errors.TopictkError
        When ``path`` is not a run directory, the model or checkpoint is missing or damaged,
        or the run's corpus store has changed.
    """
    from topictk.evaluation.run import LoadedRun

    return Run(LoadedRun(path, checkpoint, threads), checkpoint, threads)


class Run:
    """A trained run: its config, corpus store and model (final, or one checkpoint).

    Made by :func:`load_run`.

    Attributes
    ----------
    path : Path
        The run directory.
    checkpoint : int or None
        The checkpoint step loaded, None for the final model.
    config : topictk.config.Config
        The resolved config the run was trained with.
    algorithm : str
        The inference algorithm (``config.inference.algorithm``).
    store : topictk.corpus.store.CorpusStore
        The corpus store the run was trained on.
    """

    def __init__(self, loaded, checkpoint: int | None = None, threads: int | None = None):
        self._loaded = loaded
        self._threads = threads
        self.path: Path = loaded.run_dir
        self.checkpoint = checkpoint
        self.config = loaded.config
        self.algorithm: str = loaded.config.inference.algorithm
        self.store = loaded.store

    def __repr__(self) -> str:
        which = "final model" if self.checkpoint is None else f"checkpoint {self.checkpoint}"
        return f"Run({str(self.path)!r}, {self.algorithm}, K = {self.n_topics}, {which})"

    @property
    def n_topics(self) -> int:
        """K, the number of topics (of the bottom layer for deep models; of an HDP run, its
        live topics): the rows of :meth:`topic_word`."""
        return len(self.topic_ids)

    @property
    def topic_ids(self) -> list[int]:
        """The number people read for each row of :meth:`topic_word` (each column of
        :meth:`doc_topic`, each entry of :meth:`labels`): 1 to K in the model's order; an HDP
        run (``model.family: hdp``) gives its live topics only, largest first, each under
        its slot number + 1, which labels files and exports use and which stays the
        topic's from checkpoint to checkpoint."""
        listed = self._listing()
        if listed is None:
            return list(range(1, int(self.config.model.topics) + 1))
        return listed.ids

    @property
    def topic_weights(self) -> dict[str, np.ndarray]:
        """An HDP run's weights of the topics of :attr:`topic_ids`: ``pi`` (the global
        weights) and ``share`` (of the training tokens); other runs: empty."""
        listed = self._listing()
        return {} if listed is None else {n: w.copy() for n, w in listed.weights.items()}

    def _listing(self):
        from topictk.evaluation.topic_listing import listing

        return listing(self._loaded)

    def _rows(self) -> np.ndarray | None:
        """The model's rows of the topics shown (an HDP run's live ones), None: all."""
        listed = self._listing()
        return None if listed is None else listed.rows

    @property
    def vocabulary(self) -> list[str]:
        """The store's words; column ``w`` of :meth:`topic_word` is ``vocabulary[w]``."""
        return list(self.store.vocab)

    @property
    def vocab(self) -> list[str]:
        """The same as :attr:`vocabulary`."""
        return self.vocabulary

    def document_ids(self, part: str = "train") -> list[str]:
        """The ids of the store's documents of ``part`` ("train" or "test"), as the input gave
        them (a JSONL ``id`` field, a file name, or ``FILE:LINE``): row ``d`` of
        :meth:`doc_topic` is document ``document_ids("train")[d]``."""
        from topictk.errors import UsageError

        if part not in ("train", "test"):
            raise UsageError(f"document_ids: part must be 'train' or 'test'; got {part!r}")
        return self.store.document_ids(part)

    @property
    def step(self) -> int:
        """Training steps done (sweeps, or mini-batch updates)."""
        return int(self._loaded.header["state"]["step"])

    @property
    def train_seconds(self) -> float:
        """Wall-clock seconds spent in training steps (evaluation excluded)."""
        return float(self._loaded.header.get("clock", {}).get("train_seconds", 0.0))

    @property
    def status(self) -> str:
        """How training stopped at this model: ``completed``, ``time_limit`` or
        ``interrupted`` (a checkpoint written along the way says ``running``)."""
        return str(self._loaded.header.get("status", "completed"))

    @property
    def tokens_seen(self) -> int:
        """Training tokens visited by all steps."""
        return int(self._loaded.header.get("clock", {}).get("tokens_seen", 0))

    def resume(self, iterations: int | None = None, *, store: Any = None,
               overrides: str | Iterable[str] = (), progress: bool = True,
               callback: Callable[[dict], Any] | None = None,
               threads: int | None = None) -> Run:
        """Continue training this run from its latest checkpoint, as ``topictk train
        --config RUN/config.yaml --resume`` does: the same chain, so a run trained to N steps
        and resumed to M equals one trained to M at once.

        Parameters
        ----------
        iterations : int, optional
            Train to this many steps in all (``inference.iterations``; default: the run's,
            which finishes a run that was stopped).
        store : str, Path or CorpusStore, optional
            The run's corpus store, if it has moved (it must hold the same documents).
        overrides : str or iterable of str
            Other ``"section.key=value"`` settings; a resume may change only those that do
            not change the chain (the threads, the time limit, the evaluation and checkpoint
            schedule), and says so otherwise.
        progress, callback, threads
            As for :func:`train`.

        Returns
        -------
        Run
            The run's new final model (this object still shows the model it was opened at).
        """
        sets = [overrides] if isinstance(overrides, str) else list(overrides)
        if iterations is not None:
            sets.append(f"inference.iterations={iterations}")
        return train(self.path / "config.yaml", store=store, out=self.path, overrides=sets,
                     resume=True, progress=progress, callback=callback, threads=threads)

    def topic_word(self) -> np.ndarray:
        """The topics' word distributions, the model's point estimate.

        Returns
        -------
        numpy.ndarray
            phi, (K, V) float64, every row sums to 1; for deep models the bottom layer; for
            an HDP run its live topics, largest first (their numbers: :attr:`topic_ids`).
        """
        phi = np.array(self._loaded.topic_word(), dtype=np.float64, copy=True)
        rows = self._rows()
        return phi if rows is None else phi[rows]

    def slice_topic_word(self) -> np.ndarray:
        """Every time slice's version of the topics, for a dynamic topic model run
        (``model.family: dtm``).

        Returns
        -------
        numpy.ndarray
            (T, K, V) float64, the slices in the store's order (``open_store(...).time_slices``
            names them), every row summing to 1.

        Raises
        ------
        topictk.errors.UsageError
            When the run's topics do not change by time slice.
        """
        from topictk.errors import UsageError

        if not self._loaded.driver.traits.time_slices:
            raise UsageError(f"{self.path}: a {self._loaded.driver.name} run has one version of "
                             f"each topic; slice_topic_word is for dynamic topic model runs")
        return np.array(self._loaded.driver.slice_topic_word(self._loaded.state),
                        dtype=np.float64, copy=True)

    def doc_topic(self, *, split: str = "train", sweeps: int = 50, burn_in: int = 25,
                  seed: int | None = None, threads: int | None = None) -> np.ndarray:
        """Topic proportions of the store's training (or test) documents.

        Every algorithm gets them the same way: the documents are folded in with the model
        fixed, exactly as :meth:`infer` (and ``topictk infer``) folds in new documents, so
        the rows of runs of different algorithms can be compared.

        Parameters
        ----------
        split : {"train", "test"}
            The training documents, or the observed part of the test documents (what
            document completion folds in).
        sweeps, burn_in, seed, threads
            As for :meth:`infer`.

        Returns
        -------
        numpy.ndarray
            theta, (D, K) float64, row ``d`` for document ``d`` of the split; column ``k``
            for topic :attr:`topic_ids` ``[k]`` (an HDP run: its live topics, whose rows sum
            to 1 less the small mass of the empty slots).
        """
        from topictk.evaluation.infer import infer_documents, split_documents

        docs, features = split_documents(self.store, _split(split), self._loaded.driver)
        blocks = infer_documents(self._loaded, docs, str(self.store.path), sweeps=sweeps,
                                 burn_in=burn_in, seed=seed, threads=threads, features=features)
        return self._shown_columns(_stack(blocks, int(self.config.model.topics)))

    def _shown_columns(self, theta: np.ndarray) -> np.ndarray:
        rows = self._rows()
        return theta if rows is None else np.ascontiguousarray(theta[:, rows])

    def diagnostics(self, *, top: int = 10) -> list[dict]:
        """Per-topic diagnostics and junk flags, as ``topictk topics --diagnostics --format
        json`` gives them (docs/topics.md).

        Parameters
        ----------
        top : int
            Top words listed per topic (word length and non-words always judge the top 10).

        Returns
        -------
        list of dict
            One dict per topic in the model's order, with ``topic`` (its number, from 1),
            ``words``, ``tokens`` (training tokens assigned), ``doc_entropy`` (nats),
            ``eff_words`` (1 / sum_w phi_kw^2), ``corpus_kl`` (KL from the corpus's word
            frequencies, nats), ``top_doc_share`` (share of the tokens in the topic's 10
            largest documents), ``word_length`` (mean characters of the top 10 words),
            ``nonwords`` (how many of them look like non-words) and ``flags`` (the junk
            rules that fired: ``"few documents"``, ``"non-words"``); the definitions are
            those of :mod:`topictk.evaluation.diagnostics`.
        """
        from topictk.evaluation.diagnostics import run_diagnostics

        return run_diagnostics(self._loaded, shown=top)

    def labels(self, labels_file: str | Path | None = None, *,
               suggest: bool = False) -> list[str | None]:
        """Every topic's label, as the commands show it, by topic row (the row of
        :meth:`topic_word`; people read topic ``k`` as number ``topic_ids[k]``, ``k + 1``
        but for an HDP run).

        Parameters
        ----------
        labels_file : str or Path, optional
            Read labels from this file (``topic<TAB>label`` lines, topics numbered from 1)
            instead of the run's ``labels.tsv`` (``--labels FILE``).
        suggest : bool
            Give the topics without a label the suggested one (most frequent adjacent word
            pair, then top words; see ``topictk labels --suggest``).

        Returns
        -------
        list of str or None
            Row ``k``: the label from the labels file, else the seed label of a seeded topic,
            else (``suggest``) the suggestion, else None.
        """
        from topictk.evaluation.labels import run_labels

        suggested = None
        if suggest:
            from topictk.evaluation.topic_docs import run_suggestions

            suggested, _ = run_suggestions(self._loaded)
        found = run_labels(self.path, self.config, int(self.config.model.topics), labels_file,
                           suggested)
        rows = self._rows()
        return [label.text if label else None
                for label in (found if rows is None else [found[k] for k in rows])]

    def representative_docs(self, k: int, n: int = 5) -> list[dict]:
        """Topic row ``k``'s ``n`` most representative training documents.

        Parameters
        ----------
        k : int
            The topic's row (0-based, as in :meth:`topic_word`).
        n : int
            How many documents.

        Returns
        -------
        list of dict
            Largest theta_dk first, equal shares by the lower document index: ``document``
            (its id, as :meth:`document_ids`), ``index`` (its row among the training
            documents), ``share`` (theta_dk: from the run's training state where it keeps
            one, the Gibbs counts or the variational posterior, else a fold-in) and
            ``snippet`` (the start of its text when the store was prepared with
            ``--snippets``, else None).
        """
        from topictk.errors import UsageError
        from topictk.evaluation.topic_docs import representative_docs, training_theta

        if not 0 <= int(k) < self.n_topics:
            raise UsageError(f"representative_docs: k is a topic row, 0 to "
                             f"{self.n_topics - 1}; got {k}")
        if getattr(self, "_training", None) is None:
            self._training = training_theta(self._loaded)
        rows = self._rows()
        row = int(k) if rows is None else int(rows[int(k)])
        return representative_docs(self.store, self._training, row, int(n))

    def metrics(self) -> list[dict]:
        """The records of ``metrics.jsonl``, one per evaluation during training.

        Returns
        -------
        list of dict
            Keys ``step``, ``tokens_seen``, ``documents_seen``, ``train_seconds``,
            ``eval_seconds`` and, where measured, ``perplexity_point``,
            ``perplexity_train_heldout_point`` and the algorithm's own objective.
        """
        from topictk.rundir.metrics import read_metrics

        return read_metrics(self.path / "metrics.jsonl")

    def evaluate(self, *, left_to_right: int | None = None,
                 threads: int | None = None, coherence: str | Iterable[str] | None = None,
                 reference: str | Path | None = None, recompute: bool = False,
                 fold_in: str | None = None) -> dict:
        """Score the model as ``topictk evaluate --json`` does: the number ``compare``,
        ``report`` and ``plot`` show for the run, read from the run's ``scores.json`` when it
        holds it for this model, store and evaluation settings, else computed and cached
        there (a read-only run directory is scored every time).

        Parameters
        ----------
        left_to_right : int, optional
            Also score the held-out tokens by the left-to-right estimator with this many
            particles (``--left-to-right --particles N``).
        threads : int, optional
            Threads; the numbers do not depend on it.
        coherence : str or iterable of str, optional
            Also these coherence measures of gensim's ``CoherenceModel`` (``--coherence``):
            ``"c_v"``, ``"c_npmi"``, ``"c_uci"``, ``"u_mass"``, a comma-separated string of
            them, or ``"all"``; on the training texts of the run's store.
        reference : str or Path, optional
            Compute them on the training texts of this corpus store instead
            (``--reference``); words are matched by their spelling.
        recompute : bool
            Score again instead of reading the cache (``--recompute``).
        fold_in : {"gibbs", "mh", "fixed-point"}, optional
            The estimator of theta instead of the run's ``evaluation.fold_in``
            (``--fold-in``); cached apart from the run's own. The result's ``estimator``
            names the one used.

        Returns
        -------
        dict
            The JSON object of ``topictk evaluate --json``: ``perplexity`` (held-out,
            averaged over the saved samples), ``heldout_tokens``, ``umass``, ``npmi``,
            ``diversity``, ``step``, ... ; with ``coherence``, each measure's mean over the
            topics under its name and ``coherence`` (per-topic values, the texts, the
            windows, and the top words absent from the texts).
        """
        from topictk.evaluation.run import evaluate_run

        threads = self._threads if threads is None else threads
        if coherence is not None and not isinstance(coherence, str):
            coherence = list(coherence)
        return evaluate_run(self.path, self.checkpoint, threads, left_to_right=left_to_right,
                            coherence=coherence, reference=reference, recompute=recompute,
                            fold_in=fold_in)

    def infer(self, documents: Iterable[str | Mapping[str, Any]] | Any, *, sweeps: int = 50,
              burn_in: int = 25, seed: int | None = None, threads: int | None = None,
              text_column: str = "text") -> np.ndarray:
        """Topic proportions of new documents, as ``topictk infer`` gives them.

        Parameters
        ----------
        documents : iterable of str or mapping, or a data frame
            One document each: its text, or a mapping with a ``text`` key and the metadata
            fields a DMR run's prior depends on (as a line of JSONL input); or a data frame
            (as :func:`prepare` takes it) whose rows are such mappings. Texts are
            tokenised with the store's settings; words the store does not know are dropped.
        sweeps, burn_in : int
            Fold-in sweeps per document, and how many of them are discarded (Gibbs fold-ins:
            gibbs, sgrld, hsvg, the DMR and deep-LDA algorithms; vb, cvb, cvb0, ovb and pem
            fold in by their deterministic update, which these and ``seed`` do not change).
        seed : int, optional
            Seed of the fold-in (default: the run's ``training.seed``).
        threads : int, optional
            Threads; the result does not depend on it.
        text_column : str
            The key (column) of a mapping's (row's) text.

        Returns
        -------
        numpy.ndarray
            theta, (D, K) float64, one row per document in the given order, rows summing
            to 1.
        """
        from topictk.corpus.memory import InMemory, is_data_frame
        from topictk.corpus.readers import ReadStats
        from topictk.errors import UsageError
        from topictk.evaluation.infer import documents_from_texts, infer_documents

        if is_data_frame(documents):        # its rows as records, read as prepare reads them
            documents = [{**doc.meta, text_column: doc.text} for doc in
                         InMemory(documents, text_column).read(ReadStats())]
        texts, metas = [], []
        for i, doc in enumerate(documents):
            if isinstance(doc, str):
                texts.append(doc)
                metas.append({})
            elif isinstance(doc, Mapping) and isinstance(doc.get(text_column), str):
                texts.append(doc[text_column])
                metas.append({k: v for k, v in doc.items() if k not in (text_column, "id")})
            else:
                raise UsageError(f"document {i + 1}: give a text, or a mapping with a "
                                 f"'{text_column}' string and metadata fields; got "
                                 f"{type(doc).__name__}")
        docs = documents_from_texts(texts, self.store, metas)
        blocks = infer_documents(self._loaded, docs, "documents", sweeps=sweeps,
                                 burn_in=burn_in, seed=seed, threads=threads)
        return self._shown_columns(_stack(blocks, int(self.config.model.topics)))


def _split(split: str) -> str:
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test'; got {split!r}")
    return split


def fold_in(store, topic_word, alpha=0.1, *, split: str = "test", sweeps: int = 50,
            burn_in: int = 25, seed: int = 0, threads: int = 1) -> np.ndarray:
    """Topic proportions of a store's documents under topics from anywhere.

    The documents are folded in by collapsed Gibbs with the topics fixed, in the blocks and
    random streams a collapsed Gibbs run's :meth:`Run.doc_topic` uses, so that given a
    topictk Gibbs run's own :meth:`Run.topic_word` and α it gives that run's numbers, and
    another library's topics are compared with it document for document.

    Parameters
    ----------
    store : CorpusStore or str or Path
        The store (see :func:`open_store`).
    topic_word : numpy.ndarray
        (K, V) non-negative topic-word weights over the store's vocabulary.
    alpha : float or numpy.ndarray
        The Dirichlet document prior: a number or (K,).
    split : {"test", "train"}
        The observed part of the test documents, or the training documents.
    sweeps, burn_in, seed, threads
        Fold-in sweeps, those discarded, its seed and threads (the numbers do not depend on
        the threads).

    Returns
    -------
    numpy.ndarray
        theta, (D, K) float64, row ``d`` for document ``d`` of the split.
    """
    from topictk.evaluation.infer import fold_in_topic_word

    if isinstance(store, (str, Path)):
        store = open_store(store)
    return fold_in_topic_word(store, np.asarray(topic_word, dtype=np.float64), alpha,
                              _split(split), sweeps=sweeps, burn_in=burn_in, seed=seed,
                              threads=threads)


def _stack(blocks, n_topics: int) -> np.ndarray:
    parts = [theta for _, theta in blocks]
    return np.concatenate(parts) if parts else np.zeros((0, n_topics))


def open_store(path: str | Path):
    """Open a corpus store written by ``topictk prepare`` (read-only, memory-mapped).

    Parameters
    ----------
    path : str or Path
        The store directory.

    Returns
    -------
    topictk.corpus.store.CorpusStore
        ``.train()``, ``.test_observed()``, ``.test_heldout()`` give documents as CSR arrays
        (``indptr``, ``indices``, ``counts``) and token lists (``doc_ptr``, ``words``);
        ``.vocab``, ``.n_words`` and ``.manifest`` describe it.
    """
    from topictk.corpus.store import CorpusStore

    return CorpusStore.open(path)


def prepare(inputs: str | Path | Iterable[str | Path] | None = None,
            out: str | Path | None = None, *, texts: Any = None,
            text_column: str | None = None, id_column: str | None = None,
            **options: Any) -> dict:
    """Build a corpus store, as ``topictk prepare INPUTS --out OUT`` does, from files or from
    documents held in memory (``texts=``).

    Parameters
    ----------
    inputs : path or iterable of paths
        Text files, a folder of ``.txt`` files, a ``.jsonl`` file or a UCI docword file.
    out : str or Path
        The store directory to write.
    texts : iterable or data frame, optional
        Documents in memory, instead of ``inputs``: strings (one document each, as the lines
        of a text file), mappings with a ``"text"`` field and metadata fields (as the lines
        of a JSONL file), or a data frame (pandas', or any object with ``columns`` and
        ``itertuples``) whose rows are such records. They are read as a JSONL file of the
        same records is, so the store is the one that file gives. Ids: ``id_column``'s
        value, else an ``id`` or ``doc_id`` field, else the position from 0 (``texts[int(id)]``
        is the document).
    text_column : str, optional
        The field (column) holding the text, of ``texts`` or of CSV/TSV input files
        (``--text-column``); default ``"text"``.
    id_column : str, optional
        The field (column) holding each document's id (``--id-column``).
    **options
        The command's options with underscores: ``format``, ``vocab``, ``test_docs``,
        ``heldout_fraction``, ``heldout_train_fraction``, ``test_observed``,
        ``test_heldout``, ``min_df``, ``max_df``, ``vocab_size``, ``stopwords``, ``seed``,
        ``meta`` (fields of ``texts`` records or columns of a data frame too), ``force``, ... ;
        the preprocessing options (docs/prepare.md): ``min_length``, ``token_pattern``,
        ``case`` (``"fold"`` or ``"keep"``), ``lemmatize`` (a language code; needs the
        ``lemma`` extra), ``phrases``, ``phrase_min_count``, ``phrase_threshold``;
        ``stopwords="english+FILE"`` extends the English list.

    Returns
    -------
    dict
        The store's manifest (counts, split, hashes).

    Raises
    ------
    topictk.errors.UsageError
        Both ``inputs`` and ``texts`` given, or neither; no ``out``; an unknown option.
    """
    import dataclasses

    from topictk.corpus import memory
    from topictk.corpus.prepare import PrepareOptions
    from topictk.corpus.prepare import prepare as prepare_store
    from topictk.corpus.tables import DEFAULT_TEXT_COLUMN, TableOptions
    from topictk.errors import CorpusUsageError, UsageError
    from topictk.limits import short

    known = {f.name for f in dataclasses.fields(PrepareOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(f"prepare: unknown option(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(known))}")
    if out is None:
        raise UsageError("prepare: no out; name the store directory to write, out=DIR")
    if (inputs is None) == (texts is None):
        raise UsageError("prepare: give input files (the first argument) or documents in "
                         "memory (texts=), not " + ("both" if texts is not None else "neither"))
    opts = PrepareOptions(**options)
    if texts is None:
        if text_column is not None or id_column is not None:     # CSV/TSV columns
            if opts.table is not None:
                raise UsageError("prepare: give text_column and id_column, or table, not both")
            opts.table = TableOptions(text_columns=(text_column or DEFAULT_TEXT_COLUMN,),
                                      id_column=id_column)
        if isinstance(inputs, (str, Path)):
            inputs = [inputs]
        paths = [str(p) for p in inputs]
        for path in paths:
            if path != "-" and not _exists(path):
                raise CorpusUsageError(f"{short(path)}: no such file or folder; prepare's first "
                                       f"argument names input files: give documents held in "
                                       f"memory as texts=")
        return prepare_store(paths, out, opts)
    documents = memory.InMemory(texts, text_column or DEFAULT_TEXT_COLUMN, id_column)
    return prepare_store([memory.NAME], out, opts, documents)


def _exists(path: str) -> bool:
    """Whether ``path`` names something; False also for a name the system refuses (a text
    too long to be a file name)."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def train(config: str | Path | Mapping[str, Any], *, store: Any = None,
          out: str | Path | None = None, overrides: str | Iterable[str] = (),
          force: bool = False, resume: bool = False, progress: bool = True,
          callback: Callable[[dict], Any] | None = None,
          threads: int | None = None) -> Run:
    """Train an experiment, as ``topictk train --config CONFIG`` does: the same config
    checks, run directory and numbers, bit for bit.

    Parameters
    ----------
    config : str, Path or mapping
        A YAML config file, or a mapping in the same schema (sections ``corpus``,
        ``model``, ``inference``, ``training``, ``evaluation``, ``output``); a mapping's
        relative paths are relative to the working directory, as those of a config read from
        standard input (``--config -``). A run's own ``config.yaml`` trains that run where
        it is (unless ``out`` says otherwise).
    store : str, Path or CorpusStore, optional
        The corpus store (the config's ``corpus``), relative to the working directory.
    out : str or Path, optional
        The run directory (the config's ``output``; ``--out``).
    overrides : str or iterable of str
        ``"section.key=value"`` settings, as ``--set`` gives them.
    force : bool
        Replace a run already in ``out`` (``--force``).
    resume : bool
        Continue the run's latest checkpoint (``--resume``); see also :meth:`Run.resume`.
    progress : bool
        Show the progress bar: on a terminal, or in a Jupyter notebook as tqdm's widget (a
        plain log line per evaluation on the ``topictk`` logger otherwise, as the command
        does). False shows nothing.
    callback : callable, optional
        ``callback(record)`` after every evaluation, with the record just appended to the
        run's ``metrics.jsonl`` (a dict: ``step``, ``tokens_seen``, ``perplexity_point``,
        ...). An exception it raises stops training after that step, as Ctrl-C does: a
        checkpoint of the step is written, then the exception is raised again here
        (``resume=True`` continues the run from that checkpoint).
    threads : int, optional
        ``training.threads``; the numbers do not depend on it.

    Returns
    -------
    Run
        The trained run's final model, as :func:`load_run` opens it.

    Raises
    ------
    topictk.errors.TopictkError
        The command's one-line errors: ``ConfigError`` for a bad key or value (naming the
        key, the file or ``<config>`` for a mapping, and the fix), ``UsageError`` for an
        output that is not free, ...
    KeyboardInterrupt
        On Ctrl-C (a notebook's "interrupt the kernel"): training stops after the current
        step, writes a checkpoint and raises it again; a second Ctrl-C stops at once.
    """
    from topictk import progress as bars
    from topictk.training.run import train as run_training

    resolved = _train_config(config, store, out, overrides, threads)
    with bars.showing(None if progress else False):
        result = run_training(resolved, resume=resume, force=force, quiet=not progress,
                              callback=callback)
    if result.status == "interrupted":
        return _interrupted(result, threads)
    return load_run(result.run_dir, threads=threads)


def _train_config(config, store, out, overrides, threads):
    """The config ``train`` trains, read and checked by the loader ``topictk train`` uses,
    with the keyword arguments as overrides that name them in messages."""
    from topictk.errors import UsageError
    from topictk.inference.registry import load_config
    from topictk.rundir.guard import is_run

    sets = [overrides] if isinstance(overrides, str) else [str(o) for o in overrides]
    labels = {}
    for key, value, name in (("corpus", store, "store"), ("output", out, "out")):
        if value is not None:
            path = Path(getattr(value, "path", value))      # a CorpusStore too
            sets.append(f"{key}={path.resolve()}")
            labels[sets[-1]] = f"{name}={str(path)!r}"
    if threads is not None:
        sets.append(f"training.threads={threads}")
        labels[sets[-1]] = f"threads={threads!r}"
    if isinstance(config, Mapping):
        return load_config(None, sets, raw=dict(config), labels=labels)
    if not isinstance(config, (str, Path)):
        raise UsageError(f"train: config is a YAML file or a mapping of its sections; got "
                         f"{type(config).__name__}")
    path = Path(config)
    if (out is None and path.name == "config.yaml" and is_run(path.parent)
            and not any(s.startswith("output=") for s in sets)):
        sets.append(f"output={path.parent.resolve()}")      # the run where it is now
    return load_config(path, sets, labels=labels)


def _interrupted(result, threads: int | None) -> Run:
    """After a run stopped by a signal with its checkpoint written: Ctrl-C raises
    KeyboardInterrupt, another signal goes to the handler it had before training (SIGTERM's
    default ends the process); a run that lives on is its checkpoint."""
    import signal

    where = (f"{result.run_dir}: {result.signal_name} received: stopped at step "
             f"{result.step}, checkpoint written; continue with resume=True or Run.resume()")
    if result.signal_name == "SIGINT":
        raise KeyboardInterrupt(where)
    if result.signal_name is not None:
        signal.raise_signal(getattr(signal, result.signal_name))
    return load_run(result.run_dir, result.step, threads=threads)


def score_topic_word(store, topic_word, alpha, *, sweeps: int = 50,
                     burn_in: int = 25, seed: int = 0, threads: int = 1,
                     coherence: bool = False, fold_in: str = "gibbs",
                     tol: float | None = None, max_iterations: int | None = None) -> dict:
    """Score topics from anywhere (another library's model) on a store's held-out tokens.

    The estimator is the one ``topictk evaluate`` uses for a collapsed Gibbs run's point
    estimate: every test document's observed part is folded in with the topics fixed (by
    collapsed Gibbs, or by the fixed-point iteration with ``fold_in="fixed-point"``), and its
    held-out part scored by document completion. Models of different libraries scored by it
    on one store, with one ``fold_in``, are compared on the same tokens and estimator.

    Parameters
    ----------
    store : CorpusStore or str or Path
        The store (see :func:`open_store`) whose held-out tokens are scored.
    topic_word : numpy.ndarray or list of numpy.ndarray
        (K, V) non-negative topic-word weights over the store's vocabulary; rows are
        normalised. A list is a set of posterior samples: the held-out probabilities are
        averaged over them, as ``topictk evaluate`` averages a run's saved samples.
    alpha : float or numpy.ndarray, or a list of them
        The Dirichlet document prior: a number, (K,), or (D_test, K), one row per test
        document; with samples, one per sample or one for all.
    sweeps, burn_in : int
        Gibbs fold-in sweeps per test document, and how many are discarded.
    seed : int
        Seed of the fold-in.
    threads : int
        Threads; the numbers do not depend on it.
    coherence : bool
        Also compute ``umass``, ``npmi`` and ``diversity`` on the training documents.
    fold_in : {"gibbs", "fixed-point"}
        The estimator of theta (docs/evaluate.md, "Two estimators of theta for document
        completion"); ``sweeps``, ``burn_in`` and ``seed`` are the Gibbs one's.
    tol, max_iterations : optional
        The fixed-point fold-in's stopping rule (default: ``evaluation.fold_in_tol`` and
        ``evaluation.fold_in_max_iterations``'s defaults, 1e-6 and 500).

    Returns
    -------
    dict
        ``perplexity``, ``heldout_tokens``, ``floored_tokens``, ``samples``, ``estimator``
        (and the coherence keys, of the first sample).
    """
    from topictk.evaluation.external import score_topic_word as score

    if isinstance(store, (str, Path)):
        store = open_store(store)
    return score(store, topic_word, alpha, sweeps=sweeps, burn_in=burn_in, seed=seed,
                 threads=threads, coherence=coherence, fold_in=fold_in, tol=tol,
                 max_iterations=max_iterations)


def score_slice_topics(store, slice_topic_word, slice_means, eta_var: float, *,
                       sweeps: int = 50, burn_in: int = 25, seed: int = 0,
                       threads: int = 1) -> dict:
    """Score a dynamic topic model from anywhere (another library's) on a store with time
    slices, as ``topictk evaluate`` scores a ``dtm-sgld`` run.

    Every test document's observed part is folded in with its slice's topics fixed and a
    logistic-normal prior around its slice's mean (docs/algorithms.md §14.4), and its
    held-out part scored by document completion.

    Parameters
    ----------
    store : CorpusStore or str or Path
        A store prepared with ``--time-column``.
    slice_topic_word : numpy.ndarray
        (T, K, V) every slice's topics over the store's vocabulary; rows are normalised. A
        test document of a slice beyond the T given (a forecast store's last slice) takes the
        last slice's topics.
    slice_means : numpy.ndarray
        (T, K) the slices' mean topic parameters (the mean of a document's eta).
    eta_var : float
        The variance of a document's topic parameters around its slice's mean.
    sweeps, burn_in, seed, threads
        The fold-in's sweeps, how many are discarded, its seed and threads (the numbers do
        not depend on the threads).

    Returns
    -------
    dict
        ``perplexity``, ``perplexity_by_slice`` (by the slices' names), ``heldout_tokens``,
        ``floored_tokens``, ``estimator`` (``dtm``).
    """
    from topictk.evaluation.external import score_slice_topics as score

    if isinstance(store, (str, Path)):
        store = open_store(store)
    return score(store, slice_topic_word, slice_means, eta_var, sweeps=sweeps,
                 burn_in=burn_in, seed=seed, threads=threads)


def coherence(store, topics: Iterable[Iterable[str]],
              measures: str | Iterable[str] = "all", *, progress: bool | None = None) -> dict:
    """Coherence of topics from anywhere, as gensim's ``CoherenceModel`` computes it, on the
    training texts of a store (``topictk evaluate --coherence``, docs/evaluate.md).

    Parameters
    ----------
    store : CorpusStore or str or Path
        The store (see :func:`open_store`) whose training documents, in their token order,
        are the texts.
    topics : iterable of iterables of str
        Each topic's top words, best first (gensim's ``topics`` given as words).
    measures : str or iterable of str
        ``"c_v"``, ``"c_npmi"``, ``"c_uci"``, ``"u_mass"``, a comma-separated string of
        them, or ``"all"``.
    progress : bool, optional
        A progress bar on stderr (default: when stderr is a terminal).

    Returns
    -------
    dict
        ``mean`` (measure -> mean over the scored topics), ``per_topic`` (measure -> one
        value per topic, None for a topic with fewer than two words in the texts),
        ``absent`` (word -> the topics it was left out of: words that never occur in the
        texts) and ``windows`` (measure -> windows counted; documents for u_mass).
    """
    from topictk.errors import UsageError
    from topictk.evaluation.coherence import gensim_coherence, parse_measures

    if isinstance(store, (str, Path)):
        store = open_store(store)
    try:
        names = parse_measures(measures)
    except ValueError as exc:
        raise UsageError(f"coherence: {exc}") from None
    topics = [[str(w) for w in topic] for topic in topics]
    return gensim_coherence(topics, store.train(), store.vocab, names, progress=progress)


def compare_runs(paths: str | Path | Iterable[str | Path], *,
                 coherence: str | Iterable[str] | None = None,
                 reference: str | Path | None = None, left_to_right: int | None = None,
                 allow_different_corpora: bool = False, threads: int | None = None,
                 recompute: bool = False, quiet: bool = False) -> list[dict]:
    """Runs side by side, ranked as ``topictk compare`` ranks them: lowest held-out perplexity
    first.

    Every run is scored as ``topictk evaluate`` scores it, from its ``scores.json`` when that
    holds the score, else computed and cached there; so the order is that of ``compare``
    and of the runs' ``evaluate`` perplexities.

    Parameters
    ----------
    paths : str or Path, or an iterable of them
        Run directories, or folders of runs (the output of ``topictk train --sweep``).
    coherence : str or iterable of str, optional
        Also these gensim coherence measures of every run (``"c_v"``, ``"c_npmi"``,
        ``"c_uci"``, ``"u_mass"``, comma-separated, or ``"all"``), as
        :meth:`Run.evaluate` computes them; cached in ``scores.json`` too.
    reference : str or Path, optional
        The corpus store whose training texts the coherence is computed on (default: each
        run's own).
    left_to_right : int, optional
        Also the left-to-right perplexity with this many particles (slow).
    allow_different_corpora : bool
        Accept runs of different corpus stores (``--allow-different-corpora``): they are
        listed in the order given, with a warning that their perplexities are not comparable.
    threads : int, optional
        Threads for the scoring; the numbers do not depend on it.
    recompute : bool
        Score every run again instead of reading the cache.
    quiet : bool
        No progress bars (by default they are shown on a terminal or in a notebook, as the
        command shows them).

    Returns
    -------
    list of dict
        One record per run: ``path``, ``label``, ``algorithm``, ``topics`` (K; of the bottom
        layer for deep models), ``layers`` (deep models' layer sizes, else None), ``seed``,
        ``iterations``, ``train_seconds``, ``perplexity`` (held-out, evaluate's),
        ``protocol`` (how it was measured, one line), ``perplexity_comparable``, ``umass``,
        ``npmi``, ``diversity``; each coherence measure asked for under its name; a run
        without its final model has ``missing`` (what it lacks, and the fix) and no scores.

    Raises
    ------
    topictk.errors.CorpusUsageError
        When the runs were trained on different corpus stores and
        ``allow_different_corpora`` is False.

    Warns
    -----
    UserWarning
        When the runs' stores differ (with ``allow_different_corpora``) or their evaluation
        settings differ: the same lines ``topictk compare`` prints.

    Examples
    --------
    >>> import topictk
    >>> runs = topictk.compare_runs("runs/sweep", coherence="c_npmi")   # doctest: +SKIP
    >>> best = runs[0]
    >>> best["topics"], best["perplexity"], best["c_npmi"], best["protocol"]  # doctest: +SKIP
    (20, 1834.2, 0.061, 'evaluate: document completion on all 34 test documents, ...')
    """
    import warnings
    from contextlib import nullcontext

    from topictk import progress
    from topictk.evaluation.compare import compare_runs as ranked_rows
    from topictk.evaluation.runs import check_same_store, discover_runs, protocol_differences
    from topictk.evaluation.scores import protocol_line

    if isinstance(paths, (str, Path)):
        paths = [paths]
    found = discover_runs(list(paths))
    comparable = check_same_store(found, allow_different_corpora)
    if not comparable:
        warnings.warn("trained on different corpus stores: these perplexities are computed on "
                      "different held-out tokens and are not comparable", stacklevel=2)
    differences = protocol_differences(found, left_to_right)
    for line in differences:
        warnings.warn(f"the runs are scored differently: {line}", stacklevel=2)
    by_path = {str(run.path): run for run in found}
    with progress.quiet() if quiet else nullcontext():
        rows = ranked_rows(found, comparable=comparable, left_to_right=left_to_right,
                           threads=threads, recompute=recompute, quiet=quiet)
        records = []
        for row in rows:
            run = by_path[row["path"]]
            layers = run.config.model.get("layers")
            record = {"path": run.path, "label": row.pop("run"), "algorithm": row["algorithm"],
                      "topics": int(run.config.model.topics),
                      "layers": [int(k) for k in layers] if layers else None,
                      "seed": int(run.config.training.seed),
                      "protocol": protocol_line(run.config, left_to_right),
                      "perplexity_comparable": comparable and not differences}
            record.update({k: v for k, v in row.items() if k not in ("path", "topics")})
            if coherence is not None and "missing" not in row:
                scores = load_run(run.path, threads=threads).evaluate(
                    coherence=coherence, reference=reference, recompute=recompute)
                record.update({m: scores[m] for m in scores["coherence"]["per_topic"]})
            records.append(record)
    return records


def intrusion_precision(answers: str | Path, key: str | Path) -> dict:
    """Model precision of word-intrusion tasks (Chang et al. 2009): per topic, the share of
    judges who picked the intruder.

    Parameters
    ----------
    answers : str or Path
        The judges' answers: a TSV file whose first line names the columns ``topic`` and
        ``word`` (other columns, such as a judge, are ignored), then one line per judge and
        topic: the topic's number and the word picked.
    key : str or Path
        The answer key written with the tasks (``topictk export RUN --what intrusion --out
        tasks.tsv --key key.tsv``), TSV or JSON.

    Returns
    -------
    dict
        ``per_topic``: topic number -> ``{"precision", "answers", "intruder"}`` (precision
        None for a topic without answers); ``mean``: the mean over the topics answered.

    Raises
    ------
    topictk.errors.UsageError
        A file that cannot be read, an answer for a topic not in the key, or a word that was
        not shown for its topic (the file and line named).

    Examples
    --------
    >>> import topictk
    >>> mp = topictk.intrusion_precision("answers.tsv", "key.tsv")     # doctest: +SKIP
    >>> mp["per_topic"][1]["precision"], mp["mean"]                     # doctest: +SKIP
    (0.8, 0.65)
    """
    from topictk.errors import UsageError
    from topictk.evaluation.intrusion import model_precision

    try:
        return model_precision(answers, key)
    except OSError as exc:
        raise UsageError(f"{exc.filename}: cannot be read ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(str(exc)) from None
