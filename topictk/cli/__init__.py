"""The ``topictk`` command: a click group with one thin module per command."""
from __future__ import annotations

import errno
import logging
import os
import sys

import click
import numpy as np

from topictk import __version__
from topictk.cli.options import STDOUT
from topictk.errors import TopictkError
from topictk.limits import one_line, out_of_memory

# what to do about an OSError, by errno; the message names the path
_OS_FIX = {
    errno.ENOSPC: "free some space on that device, or write somewhere else",
    errno.EDQUOT: "free some space within your quota, or write somewhere else",
    errno.EROFS: "the file system is read-only; write somewhere else",
    errno.EACCES: "check its permissions, or use another path",
    errno.EPERM: "check its permissions, or use another path",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder; check the path",
    errno.EISDIR: "it is a folder; give a file",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n)",
    errno.EIO: "the device reported an input/output error; check the disk",
}


def os_error_message(exc: OSError) -> str:
    """One line for an OSError: the path (or standard output), what the system said, the fix."""
    if isinstance(exc, BrokenPipeError) and exc.filename is None:
        where = STDOUT
    else:
        where = exc.filename if exc.filename is not None else "a file"
    if getattr(exc, "filename2", None) is not None:
        where = f"{where} -> {exc.filename2}"
    reason = exc.strerror or str(exc) or type(exc).__name__
    if isinstance(exc, BrokenPipeError):
        return f"{where}: {reason}; the reader of the output stopped early"
    fix = _OS_FIX.get(exc.errno)
    return f"{where}: {reason}" + (f"; {fix}" if fix else "")


class _NamedStdout:
    """Standard output whose write errors name it: an OSError from ``write`` or ``flush``
    (a full device, a closed pipe) carries ``<stdout>`` as its file name."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as exc:
            exc.filename = exc.filename or STDOUT
            raise

    def flush(self):
        try:
            return self._stream.flush()
        except OSError as exc:
            exc.filename = exc.filename or STDOUT
            raise

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush of output
    that cannot be written does not print a second error after ours."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


class TopictkGroup(click.Group):
    """Turns every failure into one line on stderr and its exit code: :class:`TopictkError`
    its own code (2 for usage), OSError 1 with the path, Ctrl-C 130, anything else 1 with the
    exception named; ``--debug`` shows the traceback instead. NumPy's floating-point warnings
    are not printed: a NaN or infinity that matters ends in a :class:`NumericalError`."""

    def invoke(self, ctx: click.Context):
        debug = bool(ctx.params.get("debug"))
        stdout = sys.stdout
        sys.stdout = _NamedStdout(stdout)
        try:
            if debug:
                return super().invoke(ctx)
            with np.errstate(all="ignore"):
                return super().invoke(ctx)
        except click.exceptions.UsageError as exc:
            # a bad option or argument of a command: one line, like every other failure
            if debug:
                raise
            command = exc.ctx.command_path if exc.ctx is not None else "topictk"
            _fail(ctx, f"{one_line(exc.format_message()).rstrip('.')}; see '{command} --help'", 2)
        except (click.exceptions.Exit, click.exceptions.ClickException, click.Abort):
            raise
        except TopictkError as exc:
            if debug:
                raise
            _fail(ctx, one_line(exc, 2000), exc.exit_code)
        except KeyboardInterrupt:
            if debug:
                raise
            _fail(ctx, "interrupted", 130, prefix="topictk: ")
        except MemoryError:
            if debug:
                raise
            _fail(ctx, out_of_memory(f"topictk {ctx.invoked_subcommand or ''}".strip(), None,
                                     "free memory, or ask for less: a run of fewer topics, "
                                     "fewer documents at a time"), 1)
        except OSError as exc:
            if debug:
                raise
            if exc.filename == STDOUT or isinstance(exc, BrokenPipeError):
                _silence_stdout()
            _fail(ctx, os_error_message(exc), 1)
        except RecursionError:
            if debug:
                raise
            _fail(ctx, "input nested too deeply to be read; rerun with --debug to see where",
                  1)
        except Exception as exc:    # a defect: say so in one line, the traceback with --debug
            if debug:
                raise
            _fail(ctx, f"internal error ({type(exc).__name__}: {one_line(exc)}); rerun with "
                       f"--debug for the traceback and report it", 1)
        finally:
            sys.stdout = stdout


def _fail(ctx: click.Context, message: str, code: int, prefix: str = "topictk: error: "):
    try:
        click.echo(f"{prefix}{message}", err=True)
    except OSError:
        pass
    ctx.exit(code)


class _StderrHandler(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a record is emitted, not when the handler was
    made: a command run again in the same process (click's CliRunner swaps the streams for
    every invocation) must not log to the streams of an earlier invocation."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


@click.group(cls=TopictkGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="topictk")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Topic models from the command line: prepare a corpus, train, evaluate, read topics, infer,
    compare, plot, export and report runs."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    logger = logging.getLogger("topictk")
    if not logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("topictk: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.INFO)


from topictk.cli import (  # noqa: E402  (register commands)
    compare,
    config,
    convert,
    evaluate,
    export,
    infer,
    labels,
    plot,
    prepare,
    report,
    topics,
    train,
)

cli.add_command(prepare.prepare)
cli.add_command(train.train)
cli.add_command(evaluate.evaluate)
cli.add_command(topics.topics)
cli.add_command(infer.infer)
cli.add_command(config.config)
cli.add_command(config.algorithms)
cli.add_command(compare.compare)
cli.add_command(plot.plot)
cli.add_command(export.export)
cli.add_command(report.report)
cli.add_command(labels.labels)
cli.add_command(convert.convert)


def main() -> None:
    try:
        cli(prog_name="topictk")
    except KeyboardInterrupt:           # Ctrl-C before or after a command ran
        click.echo("topictk: interrupted", err=True)
        sys.exit(130)
