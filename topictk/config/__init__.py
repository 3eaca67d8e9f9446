"""Experiment configuration: YAML file -> ``--set`` overrides -> validation -> frozen sections."""
from __future__ import annotations

from topictk.config.loader import Config, load_config, parse_override
from topictk.config.schema import Option

__all__ = ["Config", "Option", "load_config", "parse_override"]
