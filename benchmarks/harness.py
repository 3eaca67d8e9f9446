"""What every benchmark needs: measured subprocesses, the machine's description and its load,
corpus stores prepared from ``../shared/data``, ``topictk train``/``evaluate`` runs, tables,
and the results file of each script.

Benchmarks drive topictk through its command line and its public Python API
(:mod:`topictk.api`) only, so that a change of topictk's internals cannot break them.

Paths: corpora are read from ``../shared/data`` (beside the repository); stores, runs and logs
go to ``benchmarks/work/`` (git-ignored); a script's report goes to
``benchmarks/work/results/NAME.md`` unless it is run with ``--record``, which writes
``benchmarks/results/NAME.md`` (the recorded results, linked from ``benchmarks/RESULTS.md``).
"""
from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = (REPO / ".." / "shared" / "data").resolve()
WORK = HERE / "work"
RESULTS = HERE / "results"
FIGURES = HERE / "figures"
TOPICTK = [sys.executable, "-m", "topictk"]
NOTES_MARKER = "<!-- hand-written notes below: kept when the file is written again -->"


def log(msg: str) -> None:
    """A time-stamped progress line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rel(path) -> str:
    """``path`` relative to the repository root when it is inside it (for printed commands)."""
    path = Path(path)
    try:
        return os.path.relpath(path, REPO)
    except ValueError:
        return str(path)


def data_path(*parts: str) -> Path:
    """A file of ``../shared/data``; stops the script with a message when it is missing."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        raise SystemExit(f"{path}: not found (the shared corpora are expected in "
                         f"{DATA})")
    return path


# ----------------------------------------------------------------------------- the machine
def cpu_busy_seconds() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:9]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def foreign_load(seconds: float = 1.0) -> float:
    """Cores kept busy by other processes over the next ``seconds`` (this one sleeps)."""
    before = cpu_busy_seconds()
    time.sleep(seconds)
    return (cpu_busy_seconds() - before) / seconds


def spare_cores(threads: int) -> int:
    """Cores other processes may use without taking one from a run of ``threads``."""
    return max(0, (os.cpu_count() or 1) - threads)


def wait_for_quiet(threads: int, margin: float = 0.3, max_wait: float = 20.0) -> float:
    """Wait (at most ``max_wait`` s) until other processes leave a run of ``threads`` its
    cores (their load below ``spare_cores(threads) + margin``); returns the load last seen."""
    began = time.monotonic()
    while True:
        load = foreign_load(1.0)
        if load < spare_cores(threads) + margin or time.monotonic() - began >= max_wait:
            return load
        time.sleep(3.0)


def process_cpu() -> float:
    """CPU seconds of this process so far (every thread)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _command_output(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO).stdout.strip()
    except OSError:
        return ""


def versions(*modules: str) -> dict[str, str]:
    """Installed versions of ``modules`` ("not installed" when missing)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in modules:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def machine_info(*peers: str) -> list[str]:
    """Markdown bullet lines: CPU, cores, RAM, Python and library versions, topictk commit."""
    lscpu = _command_output(["lscpu"])
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                  if line.startswith("Model name")), platform.processor() or platform.machine())
    with open("/proc/meminfo") as f:
        mem_kb = next((int(line.split()[1]) for line in f if line.startswith("MemTotal")), 0)
    libs = versions("numpy", "scipy", *peers)
    head = _command_output(["git", "rev-parse", "--short", "HEAD"])
    dirty = _command_output(["git", "status", "--porcelain", "--", "topictk"])
    return [f"- CPU: {model}; {os.cpu_count()} logical cores; RAM {mem_kb / 2**20:.1f} GiB",
            f"- Python {platform.python_version()}, "
            + ", ".join(f"{k} {v}" for k, v in libs.items()),
            f"- topictk: git {head}" + (" with uncommitted changes under topictk/" if dirty
                                        else " (clean)")]


def now_utc() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


# ----------------------------------------------------------------------------- processes
# A Python child reports its own high-water mark (VmHWM, which exec resets): wait4's
# ru_maxrss of a child also counts the pages of the parent it was forked from, and a
# benchmark's parent holds numpy, topictk and its results.
_PEAK_WRAPPER = """
import atexit, os, runpy, sys
out = sys.argv[1]
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            open(out, "w").write(line.split()[1])
atexit.register(peak)
if sys.argv[2] == "-m":
    sys.argv = sys.argv[3:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = sys.argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_measured(cmd: Sequence[str], log_path: Path, *, stdout_path: Path | None = None,
                 poll_memory: bool = False) -> dict:
    """Run ``cmd`` in its own process (stderr, and stdout unless ``stdout_path``, to
    ``log_path``) and measure it.

    Returns ``rc``, ``wall`` (s), ``cpu`` (s, every thread), ``maxrss`` (bytes: the peak RSS
    of the process, for Python commands its own VmHWM, otherwise wait4's ru_maxrss),
    ``foreign`` (cores other processes kept busy meanwhile: the contention) and ``stdout``
    when ``stdout_path`` is given. ``poll_memory``: also the peaks of RssAnon and RssFile
    (bytes) read from /proc every 20 ms.
    """
    cmd = [str(c) for c in cmd]
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    peak_file = log_path.with_suffix(".peak")
    peak_file.unlink(missing_ok=True)
    own_peak = cmd[0] == sys.executable and len(cmd) > 1 and not cmd[1].startswith("-c")
    shown = cmd
    if own_peak:
        cmd = [cmd[0], "-c", _PEAK_WRAPPER, str(peak_file), *cmd[1:]]
    peaks = {"rss_anon": 0, "rss_file": 0}
    with open(log_path, "w") as err:
        err.write("$ " + shlex.join(shown) + "\n")
        err.flush()
        out = open(stdout_path, "w") if stdout_path else err
        try:
            busy0 = cpu_busy_seconds()
            began = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=REPO)
            done = threading.Event()

            def poll() -> None:
                status = Path(f"/proc/{proc.pid}/status")
                while not done.is_set():
                    try:
                        for line in status.read_text().splitlines():
                            for key, name in (("RssAnon:", "rss_anon"), ("RssFile:", "rss_file")):
                                if line.startswith(key):
                                    peaks[name] = max(peaks[name], int(line.split()[1]) * 1024)
                    except (OSError, ValueError):
                        pass
                    done.wait(0.02)

            poller = threading.Thread(target=poll, daemon=True) if poll_memory else None
            if poller:
                poller.start()
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - began
            busy = cpu_busy_seconds() - busy0
            done.set()
            if poller:
                poller.join()
        finally:
            if stdout_path:
                out.close()
    cpu = usage.ru_utime + usage.ru_stime
    result = {"rc": os.waitstatus_to_exitcode(status), "wall": wall, "cpu": cpu,
              "maxrss": usage.ru_maxrss * 1024,
              "foreign": max(0.0, (busy - cpu) / wall) if wall > 0 else 0.0}
    if own_peak and peak_file.exists():
        result["maxrss"] = int(peak_file.read_text()) * 1024
        peak_file.unlink()
    if poll_memory:
        result.update(peaks)
    if stdout_path:
        result["stdout"] = Path(stdout_path).read_text()
    return result


def tail(path: Path, n: int = 5) -> str:
    """The last ``n`` lines of a log file (for error messages)."""
    try:
        return "\n".join(Path(path).read_text().splitlines()[-n:])
    except OSError:
        return ""


# ----------------------------------------------------------------------------- corpora
# ``topictk prepare`` arguments (paths relative to ../shared/data) of the benchmark corpora.
CORPORA: dict[str, list[str]] = {
    "uci_kos": ["uci_kos/docword.kos.txt.gz", "--vocab", "uci_kos/vocab.kos.txt",
                "--test-docs", "0.1", "--heldout-fraction", "0.2", "--seed", "0"],
    "20news_gan2015": ["20news_gan2015/docword.train.txt.gz",
                       "--vocab", "20news_gan2015/vocab.txt",
                       "--test-observed", "20news_gan2015/docword.test_observed80.txt.gz",
                       "--test-heldout", "20news_gan2015/docword.test_heldout20.txt.gz"],
    # Protocol B stores: no test documents, a share of every training document held out
    "kos_protocol_b": ["uci_kos/docword.kos.txt.gz", "--vocab", "uci_kos/vocab.kos.txt",
                       "--test-docs", "0", "--heldout-train-fraction", "0.1", "--seed", "0"],
    "nips_protocol_b": ["uci_nips_filtered_giuseppedib/docword.train.txt.gz",
                        "--vocab", "uci_nips_filtered_giuseppedib/vocab.filtered.txt",
                        "--test-docs", "0", "--heldout-train-fraction", "0.1", "--seed", "0"],
    "nips12": ["nips12_roweis_knowceans/docword.nips12.txt.gz",
               "--vocab", "nips12_roweis_knowceans/vocab.nips12.txt",
               "--test-docs", "0", "--heldout-train-fraction", "0.2", "--seed", "0"],
    "poliblog": ["stm_poliblog5k/docword.poliblog5k.txt.gz",
                 "--vocab", "stm_poliblog5k/vocab.poliblog5k.txt",
                 "--meta-file", "stm_poliblog5k/metadata.tsv", "--meta", "rating,blog"],
    "nips_year": ["nips12_roweis_knowceans/docword.nips12.txt.gz",
                  "--vocab", "nips12_roweis_knowceans/vocab.nips12.txt",
                  "--meta-file", "nips12_roweis_knowceans/metadata.tsv", "--meta", "year:cat"],
    "kos_default": ["uci_kos/docword.kos.txt.gz", "--vocab", "uci_kos/vocab.kos.txt"],
    # a few hundred test documents each, so that a fixed-point fold-in at K = 10,000 can score
    # a curve (bench_default_route.py)
    "20news_docs": ["20news_gan2015/docword.train.txt.gz", "--vocab", "20news_gan2015/vocab.txt",
                    "--test-docs", "0.03", "--heldout-fraction", "0.2", "--seed", "0"],
    "nips12_docs": ["nips12_roweis_knowceans/docword.nips12.txt.gz",
                    "--vocab", "nips12_roweis_knowceans/vocab.nips12.txt",
                    "--test-docs", "0.1", "--heldout-fraction", "0.2", "--seed", "0"],
    # the filtered NIPS training documents with a test split of their own
    "uci_nips": ["uci_nips_filtered_giuseppedib/docword.train.txt.gz",
                 "--vocab", "uci_nips_filtered_giuseppedib/vocab.filtered.txt",
                 "--test-docs", "0.1", "--heldout-fraction", "0.2", "--seed", "0"],
}


def prepare_args(name: str) -> list[str]:
    """The ``topictk prepare`` arguments of corpus ``name`` with absolute data paths."""
    if name not in CORPORA:
        raise SystemExit(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}")
    return [str(DATA / a) if a.endswith((".gz", ".txt", ".tsv")) else a for a in CORPORA[name]]


def prepare_command(name: str, out: Path) -> str:
    """The prepare command of ``name`` as a user would type it (for reports)."""
    shown = [a.replace(str(DATA), "../shared/data") for a in prepare_args(name)]
    return shlex.join(["topictk", "prepare", *shown, "--out", rel(out)])


def store_facts(path: Path) -> dict:
    """Counts of a prepared store from its manifest, and its size on disk."""
    manifest = json.loads((Path(path) / "manifest.json").read_text())
    arrays = manifest["arrays"]
    return {"path": str(path), "bytes": dir_bytes(path),
            "D": arrays["train_doc_ptr"]["shape"][0] - 1,
            "N": arrays["train_words"]["shape"][0],
            "V": int(manifest["counts"]["vocabulary"]),
            "test_docs": arrays["test_obs_doc_ptr"]["shape"][0] - 1}


def ensure_store(name: str, args: Sequence[str] | None = None, *,
                 out: Path | None = None) -> Path:
    """The store of corpus ``name`` under ``benchmarks/work/stores`` (prepared once by
    ``topictk prepare`` in a subprocess); ``args`` replace the registered arguments."""
    out = Path(out) if out is not None else WORK / "stores" / name
    if (out / "manifest.json").exists():
        return out
    data_path()                                  # the shared data must be there
    args = list(args) if args is not None else prepare_args(name)
    log(f"prepare {name}")
    logfile = WORK / "logs" / f"prepare-{name}.log"
    res = run_measured([*TOPICTK, "prepare", *args, "--out", str(out), "--force"], logfile)
    if res["rc"] != 0:
        raise SystemExit(f"prepare {name} failed:\n{tail(logfile)}")
    return out


# the 20 Newsgroups bydate store of the coherence and score-cache benchmarks: the shared
# tarball converted to JSONL (headers, quotes and signatures removed), then prepared
NEWS_JSONL = WORK / "coherence" / "20news.jsonl"
NEWS_STORE = WORK / "stores" / "20news_bydate"
NEWS_CONVERT = ["--remove-headers", "--remove-quotes", "--remove-signatures"]
NEWS_PREPARE = ["--split-field", "split", "--min-df", "5", "--max-df", "0.5"]


def ensure_20news_bydate() -> Path:
    """The 20 Newsgroups bydate store (:data:`NEWS_STORE`), made once."""
    if (NEWS_STORE / "manifest.json").exists():
        return NEWS_STORE
    tarball = data_path("20news_bydate_raw", "20news-bydate.tar.xz")
    NEWS_JSONL.parent.mkdir(parents=True, exist_ok=True)
    script = REPO / "data_scripts" / "newsgroups_to_jsonl.py"
    logfile = WORK / "logs" / "convert-20news.log"
    res = run_measured([sys.executable, str(script), str(tarball), *NEWS_CONVERT, "--quiet",
                        "--out", str(NEWS_JSONL)], logfile)
    if res["rc"] != 0:
        raise SystemExit(f"converting 20 Newsgroups failed:\n{tail(logfile)}")
    return ensure_store("20news_bydate", [str(NEWS_JSONL), *NEWS_PREPARE], out=NEWS_STORE)


def news_commands() -> list[str]:
    """The commands that make :func:`ensure_20news_bydate`'s store, for a results file."""
    return ["python data_scripts/newsgroups_to_jsonl.py "
            "../shared/data/20news_bydate_raw/20news-bydate.tar.xz \\",
            f"    {' '.join(NEWS_CONVERT)} --out {rel(NEWS_JSONL)}",
            f"topictk prepare {rel(NEWS_JSONL)} {' '.join(NEWS_PREPARE)} --out {rel(NEWS_STORE)}"]


def replicated_kos(copies: int, folder: Path) -> Path:
    """UCI KOS with every document written ``copies`` times (document ids shifted per copy),
    as a gzipped docword file in ``folder`` (made once, then reused); its vocabulary is
    ``data_path("uci_kos", "vocab.kos.txt")``."""
    out = folder / f"docword.kos.x{copies}.txt.gz"
    if out.exists():
        return out
    with gzip.open(data_path("uci_kos", "docword.kos.txt.gz"), "rt") as f:
        n_docs, n_words, _ = (int(f.readline()) for _ in range(3))
        rows = np.loadtxt(f, dtype=np.int64, ndmin=2)
    blocks = []
    for c in range(copies):
        block = rows.copy()
        block[:, 0] += c * n_docs
        blocks.append(block)
    rows = np.concatenate(blocks)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with gzip.open(tmp, "wt", compresslevel=1) as f:
        f.write(f"{n_docs * copies}\n{n_words}\n{rows.shape[0]}\n")
        np.savetxt(f, rows, fmt="%d")
    tmp.replace(out)
    return out


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


# ----------------------------------------------------------------------------- runs
def write_config(path: Path, config: dict) -> Path:
    """Write an experiment config (a dict with the YAML sections) to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def train(config: dict, config_path: Path, log_path: Path, *,
          poll_memory: bool = False, options: Sequence[str] = ()) -> dict:
    """``topictk train --config CONFIG --force --quiet [OPTIONS]`` measured (see
    :func:`run_measured`); the run directory is ``config["output"]``."""
    write_config(config_path, config)
    return run_measured([*TOPICTK, "train", "--config", str(config_path), "--force", "--quiet",
                         *options], log_path, poll_memory=poll_memory)


def train_once(config: dict, folder: Path) -> Path:
    """The run of ``config`` (its ``output``): trained unless its model is there already, its
    config written beside it in ``folder`` and its log in ``folder/logs``; a failed training
    stops the benchmark with the log's tail."""
    out = Path(config["output"])
    if (out / "model.npz").exists():
        return out
    log(f"train {out.name}")
    logfile = folder / "logs" / f"train-{out.name}.log"
    if train(config, folder / f"{out.name}.yaml", logfile)["rc"] != 0:
        raise SystemExit(f"training failed:\n{tail(logfile)}")
    return out


def wait_for_low_load(limit: float, max_wait: float, poll: float = 30.0) -> float:
    """Wait (at most ``max_wait`` s) until the 1-minute load average is below ``limit``;
    returns the load average last seen."""
    began = time.monotonic()
    while True:
        load = os.getloadavg()[0]
        if load < limit or time.monotonic() - began >= max_wait:
            return load
        log(f"load {load:.2f} >= {limit}: waiting")
        time.sleep(poll)


def evaluate(run_dir: Path, log_path: Path, *options: str) -> tuple[dict | None, dict]:
    """``topictk evaluate RUN --json [OPTIONS]``: (its JSON or None on failure, the measured
    process)."""
    out = Path(log_path).with_suffix(".json")
    res = run_measured([*TOPICTK, "evaluate", str(run_dir), "--json", *options], log_path,
                       stdout_path=out)
    return (json.loads(res["stdout"]) if res["rc"] == 0 else None), res


def model_digest(run_dir: Path) -> str:
    """sha256 over a run's model arrays (not model.npz's header, which holds the clock)."""
    digest = hashlib.sha256()
    with np.load(Path(run_dir) / "model.npz") as npz:
        for name in sorted(npz.files):
            if name != "header":
                digest.update(name.encode())
                digest.update(np.ascontiguousarray(npz[name]).tobytes())
    return digest.hexdigest()


def read_metrics(run_dir: Path) -> list[dict]:
    """The lines of a run's ``metrics.jsonl`` (also of an unfinished run)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def checkpoint_steps(run_dir: Path) -> list[int]:
    """The steps of a run's checkpoints (``checkpoints/step-NNNNNNNN.npz``), oldest first."""
    return sorted(int(p.stem.split("-")[1])
                  for p in (Path(run_dir) / "checkpoints").glob("step-*.npz"))


# ----------------------------------------------------------------------------- tables
def mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.0f}"


def fmt(x, spec: str = ".1f", missing: str = "–") -> str:
    """``x`` formatted by ``spec``, or ``missing`` for None and NaN."""
    if x is None or (isinstance(x, float) and x != x):
        return missing
    return format(x, spec)


def table(header: Sequence[str], rows: Sequence[Sequence], align: str | None = None) -> list[str]:
    """A Markdown table; ``align`` one letter per column, ``l`` or ``r`` (default: ``l``
    for the first column, ``r`` for the others)."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |",
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)]


def mean(values) -> float:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else float("nan")


def sd(values) -> float:
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return float("nan")
    m = mean(values)
    return (sum((v - m) ** 2 for v in values) / (len(values) - 1)) ** 0.5


# ----------------------------------------------------------------------------- results
def results_path(name: str, record: bool) -> Path:
    """Where a script's report goes: ``benchmarks/results/NAME.md`` with ``record``,
    otherwise ``benchmarks/work/results/NAME.md`` (a quick run never replaces recorded
    numbers)."""
    return (RESULTS if record else WORK / "results") / f"{name}.md"


def figure_path(name: str, record: bool) -> Path:
    """Where a figure goes: ``benchmarks/figures/NAME`` with ``record``, else under work/."""
    path = (FIGURES if record else WORK / "figures") / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_results(path: Path, text: str) -> Path:
    """Write a script's whole report to ``path``; the hand-written notes after
    :data:`NOTES_MARKER` in the file it replaces are kept. Written to a temporary file and
    renamed, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = text.rstrip("\n") + "\n"
    if path.exists():
        old = path.read_text(encoding="utf-8")
        at = old.find(NOTES_MARKER)
        if at >= 0:
            body += "\n" + old[at:].rstrip("\n") + "\n"
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(body, encoding="utf-8")
    os.replace(tmp, path)
    log(f"wrote {rel(path)}")
    return path


def command_line() -> str:
    """How this script was started, as a command to copy."""
    script = Path(sys.argv[0]).resolve()
    name = rel(script) if script.is_relative_to(REPO) else sys.argv[0]
    return "python " + shlex.join([name, *sys.argv[1:]])


def add_common_options(parser) -> None:
    """``--record`` (write benchmarks/results and figures instead of work/) and the
    contention options every benchmark that times runs shares."""
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/NAME.md and benchmarks/figures/ "
                             "(default: benchmarks/work/results/, so quick runs replace no "
                             "recorded number)")
    parser.add_argument("--quiet-margin", type=float, default=0.3, metavar="CORES",
                        help="before a timed run, wait until other processes use fewer than "
                             "(cores - threads of the run) + CORES cores (0.3)")
    parser.add_argument("--max-wait", type=float, default=20.0, metavar="S",
                        help="longest wait for a quiet machine before a timed run (20 s)")
