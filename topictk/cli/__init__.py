"""The ``topictk`` command: a click group with one thin module per command."""
from __future__ import annotations

import logging
import sys

import click

from topictk import __version__
from topictk.errors import TopictkError


class TopictkGroup(click.Group):
    """Turns :class:`TopictkError` into a one-line message and its exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TopictkError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"topictk: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except MemoryError:
            click.echo("topictk: error: out of memory", err=True)
            ctx.exit(1)


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
    """Topic models from the command line: prepare a corpus, train, evaluate, read topics, infer."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    logger = logging.getLogger("topictk")
    if not logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("topictk: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.INFO)


from topictk.cli import evaluate, infer, prepare, topics, train  # noqa: E402  (register commands)

cli.add_command(prepare.prepare)
cli.add_command(train.train)
cli.add_command(evaluate.evaluate)
cli.add_command(topics.topics)
cli.add_command(infer.infer)


def main() -> None:
    cli(prog_name="topictk")
