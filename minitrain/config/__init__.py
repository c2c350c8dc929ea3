"""The YAML config: schema (pydantic), loader (line numbers, --set, templates) and every validation rule.

    from minitrain.config import load_config
    cfg = load_config("experiments/18-train-mini/config.yaml", overrides=["training.batch_size=16"])

See docs/yaml-mode.md for every key and rule.
"""

from minitrain.config.loader import config_from_dict, load_config, resolved_dict, resolved_yaml
from minitrain.config.problems import ConfigError, Problem
from minitrain.config.schema import Config

__all__ = ["Config", "ConfigError", "Problem", "config_from_dict", "load_config", "resolved_dict", "resolved_yaml"]
