"""Experiment configuration: YAML file -> ``--set`` overrides -> validation -> frozen sections."""
from __future__ import annotations

from topictk.config.schema import Option
from topictk.config.loader import Config, load_config, parse_override

__all__ = ["Config", "Option", "load_config", "parse_override"]
