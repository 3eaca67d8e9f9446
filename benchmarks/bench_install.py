#!/usr/bin/env python3
"""What installing topictk costs a person, with README.md's own commands on clean clones of
this repository (its last commit: uncommitted changes are not in a clone).

Measured, each as one process (wall and CPU seconds, the cores other processes kept busy, and
the most C compilers of this build seen running at once, polled every 0.2 s):

* **install**: a fresh virtual environment and ``pip install .`` in a fresh clone, the install
  part of README's "Install and run the example" (target <= 2 minutes on an idle 2-core
  machine; the kernels compile on every core);
* **tests, first run**: the install part of README's "Run the tests" (everything before
  ``&& pytest``) in another fresh clone, which installs topictk with its test extra;
* **tests, up to date**: the same command again in that clone, which must build nothing
  (seconds).

The clones and their environments are made under ``benchmarks/work/install/`` and removed
afterwards (``--keep`` keeps them). Each round makes new ones.

Usage (any Python >= 3.10 with numpy and PyYAML, e.g. the project's venv; ``git``, ``python3``
and a C compiler on PATH)::

    python benchmarks/bench_install.py --record      # benchmarks/results/install_times.md
    python benchmarks/bench_install.py               # a check: benchmarks/work/results/
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import threading
from pathlib import Path

import harness as h

NAME = "install_times"
FOLDER = h.WORK / "install"
COMPILERS = ("cc1", "cc1plus")


def readme_commands() -> tuple[str, str]:
    """README's install command up to ``pip install .`` and its test command up to
    ``&& pytest``: what a person runs to install, as written there."""
    text = (h.REPO / "README.md").read_text(encoding="utf-8")

    def block_after(title: str) -> str:
        if title not in text:
            raise SystemExit(f"README.md: no {title!r} section; update {Path(__file__).name}")
        block = text.split(title, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
        return block.strip()

    example = block_after("**Install and run the example**")
    tests = block_after("**Run the tests**")
    if " && pip install . && " not in example or not tests.endswith(" && pytest"):
        raise SystemExit("README.md: the install commands changed shape (expected "
                         f"'... && pip install . && ...' and '... && pytest'); update "
                         f"{Path(__file__).name}")
    return example.split(" && pip install . && ", 1)[0] + " && pip install .", \
        tests[:-len(" && pytest")]


class CompilerWatch:
    """Polls /proc every 0.2 s for C compilers working in ``folder`` (their current folder
    inside it): the most seen at once, and the share of polls that saw two or more among those
    that saw any."""

    def __init__(self, folder: Path):
        self.folder = str(folder.resolve())
        self.most, self.polls, self.parallel = 0, 0, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _count(self) -> int:
        found = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if Path(entry.path, "comm").read_text().strip() not in COMPILERS:
                    continue
                if os.readlink(Path(entry.path, "cwd")).startswith(self.folder):
                    found += 1
            except OSError:
                continue
        return found

    def _poll(self) -> None:
        while not self._done.is_set():
            seen = self._count()
            if seen:
                self.most = max(self.most, seen)
                self.polls += 1
                self.parallel += seen >= 2
            self._done.wait(0.2)

    def __enter__(self) -> CompilerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def summary(self) -> str:
        if not self.polls:
            return "none"
        return f"{self.most} ({100 * self.parallel / self.polls:.0f} % of polls with >= 2)"


def clone(target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", str(h.REPO), str(target)], check=True)
    return target


def cloned_commit() -> str:
    """The commit a clone of the repository gets (its HEAD)."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=h.REPO).stdout.strip()


def measured(step: str, command: str, folder: Path, args, logs: Path) -> dict:
    """``command`` run by bash in ``folder`` (a clone), measured."""
    h.wait_for_quiet(os.cpu_count() or 1, args.quiet_margin, args.max_wait)
    h.log(f"{step}: {command}")
    log = logs / f"{step.replace(' ', '-').replace(',', '')}.log"
    with CompilerWatch(folder) as watch:
        res = h.run_measured(["bash", "-c", f"cd {shlex.quote(str(folder))} && {command}"], log)
    if res["rc"] != 0:
        raise SystemExit(f"{step} failed (exit {res['rc']}):\n{h.tail(log, 15)}")
    h.log(f"{step}: {res['wall']:.1f} s wall, {res['cpu']:.1f} s CPU, "
          f"contention {res['foreign']:.2f}, compilers at once {watch.summary()}")
    return {"step": step, "command": command, **res, "compilers": watch.summary()}


def one_round(n: int, install: str, tests: str, args) -> list[dict]:
    logs = FOLDER / "logs" / f"round-{n}"
    first = clone(FOLDER / f"install-{n}")
    second = clone(FOLDER / f"tests-{n}")
    rows = [measured("install", install, first, args, logs),
            measured("tests, first run", tests, second, args, logs),
            measured("tests, up to date", tests, second, args, logs)]
    if not args.keep:
        shutil.rmtree(first)
        shutil.rmtree(second)
    return rows


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
    except OSError:
        return "not found"
    return (out.strip().splitlines() or ["?"])[0]


def report(rows: list[dict], install: str, tests: str) -> str:
    lines = [f"# {NAME}", "",
             "Installing topictk with README.md's commands in clean clones of the repository "
             "(`benchmarks/bench_install.py`).", "",
             "```", h.command_line(), "```", "",
             "Commands (run by bash in the clone):", "",
             f"- install: `{install}`",
             f"- tests, first run and up to date: `{tests}`", "",
             f"Clones of commit {cloned_commit()}. Machine:", "", *h.machine_info(),
             f"- `python3` for the environments: {_first_line(['python3', '--version'])}; "
             f"C compiler: {_first_line([os.environ.get('CC', 'cc'), '--version'])}",
             f"- cores this process may use: {len(os.sched_getaffinity(0))} "
             f"(os.cpu_count() {os.cpu_count()}); {platform.system()} {platform.release()}",
             f"- measured {h.now_utc():%Y-%m-%d %H:%M} UTC", ""]
    table = [(r["step"], h.fmt(r["wall"]), h.fmt(r["cpu"]), h.fmt(r["foreign"], ".2f"),
              r["compilers"]) for r in rows]
    lines += h.table(["step", "wall s", "CPU s", "contention (cores)",
                      "C compilers at once (most)"], table, "lrrrl")
    lines += ["", "Contention: cores that other processes kept busy during the step (on a "
              "quiet machine about 0). Targets: install <= 120 s on an idle 2-core machine; "
              "tests, up to date: seconds."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1,
                        help="fresh clones measured one after the other (1)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the clones and their environments under "
                             "benchmarks/work/install/")
    h.add_common_options(parser)
    args = parser.parse_args()
    install, tests = readme_commands()
    rows = [row for n in range(1, args.rounds + 1) for row in one_round(n, install, tests, args)]
    h.write_results(h.results_path(NAME, args.record), report(rows, install, tests))


if __name__ == "__main__":
    main()
