"""Load a config: YAML → `--set` overrides → templates → schema → cross-field rules → `Config`.

Every stage adds to one list of problems instead of stopping at the first; if the list is not empty at the end,
one `ConfigError` (exit code 2) reports them all, each with its key path and its line. Nothing is written.

    cfg = load_config("experiments/18-train-mini/config.yaml", ["optimizer.lr_max=1e-3"])
    cfg.optimizer.lr_max            # 0.001
    cfg.source.overrides            # ("--set optimizer.lr_max=1e-3",)
    resolved_yaml(cfg)              # what the run writes as config.resolved.yaml

The data checks (`max_seq_len` against the longest record...) need the data files; they are a separate step,
`minitrain.config.datacheck.check_data(cfg)`, that `validate` and `train` run after this one.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import TypeAdapter, ValidationError

from minitrain.config.data_section import CHARACTER_DATA_KEYS, LANGUAGE_DATA_KEYS
from minitrain.config.fields import default_name
from minitrain.config.finetune_rules import quantize_warnings
from minitrain.config.observing import resolved_callback
from minitrain.config.problems import ConfigError, Problem, from_validation_error, model_at, unknown_key_message
from minitrain.config.rules import run_rules
from minitrain.config.schema import ADDED_KEYS, MODEL_KEYS, OPTIMIZER_KEYS, SCHEDULER_KEYS, Config, schema_default
from minitrain.config.source import ConfigSource, KeyPath, dotted, paths_matching, value_at, walk
from minitrain.config.spec_keys import SPEC_OUTPUT_DIR, aliases, refusal
from minitrain.config.spec_shape import manifest_problems, translate
from minitrain.config.templates import Renderer, TemplateError, has_template, render_text
from minitrain.config.tokens import looks_like_token
from minitrain.config.yaml_lines import ParsedYaml, YamlSyntaxError, parse_scalar, parse_yaml, read_yaml_text

LOCK_KEY = "minitrain_lock"  # the top-level key that marks a lock file
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def load_config(path: str | os.PathLike, overrides: Iterable[str] = (), *, values: Mapping[str, Any] | None = None,
                env: Mapping[str, str] | None = None, now: dt.datetime | None = None) -> Config:
    """Read, override, render and validate the config at `path`.

    `overrides` are `key=value` strings (`--set`), the value read as a YAML scalar. `values` maps dotted keys to
    already-typed values set by CLI flags (`{"training.rng_seed": 3}` for `--seed 3`). `env` (default
    os.environ) and `now` (default the current UTC time) feed the templates. Raises ConfigError on any problem.
    """
    return config_from_yaml(read_yaml_text(path), path, overrides, values=values, env=env, now=now)


def config_from_yaml(text: str, path: str | os.PathLike, overrides: Iterable[str] = (), **keys: Any) -> Config:
    """`load_config` (with its keyword arguments) for YAML text already in hand; `path` names it in messages and
    sets the default name."""
    path = Path(path)
    parsed, source = parse_with_source(text, path)
    if is_lock(parsed.data):
        parsed = _config_of_lock(parsed)
    source.lines.update(parsed.lines)
    problems = [
        Problem(p, f"key given twice (lines {first} and {second}); YAML would silently keep the last")
        for p, first, second in parsed.duplicates
    ]
    return _build(parsed.data, source, problems, overrides, **keys, default_name=_default_name(path))


def parse_with_source(text: str, path: str | os.PathLike) -> tuple[ParsedYaml, ConfigSource]:
    """`text` parsed, and the ConfigSource that messages about it name (its file; the caller adds the key lines
    it keeps); a ConfigError naming the line when the text is not valid YAML."""
    source = ConfigSource(path=str(path), text=text)
    try:
        return parse_yaml(text), source
    except YamlSyntaxError as exc:
        source.lines[()] = exc.line
        raise ConfigError([Problem((), f"not valid YAML: {exc}")], source) from None


def is_lock(data: Any) -> bool:
    """True for the contents of a lock file (`minitrain lock`), whose `config:` holds the resolved config."""
    return isinstance(data, dict) and LOCK_KEY in data


def _config_of_lock(parsed: ParsedYaml) -> ParsedYaml:
    # A lock file loads as the config under its `config:` key, with that key's lines.
    inner = {path[1:]: line for path, line in parsed.lines.items() if path[:1] == ("config",)}
    dups = [(p[1:], a, b) for p, a, b in parsed.duplicates if p[:1] == ("config",)]
    return ParsedYaml(parsed.data.get("config"), inner, dups)


def config_from_dict(data: Mapping[str, Any], overrides: Iterable[str] = (), **keys: Any) -> Config:
    """The same checks (`load_config`'s keyword arguments) for a config built in code (tests, notebooks);
    problems carry key paths, no lines."""
    return _build(copy.deepcopy(dict(data)), ConfigSource(), [], overrides, **keys, default_name="run")


def _default_name(path: Path) -> str:
    # experiments/18-train-mini/config.yaml is better named after its folder than "config".
    return default_name(path.parent.name if path.stem == "config" and path.parent.name else path.stem)


def _build(data, source, problems, overrides, *, values=None, env=None, now=None, default_name) -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([Problem((), "the top level must be a mapping of sections (model:, data:, ...)")], source)
    replaced: list[tuple[KeyPath, str]] = []  # templates of the file an override replaced: still checked
    for text in overrides:
        problems += _apply_override(data, source, text, replaced)
    for key, value in (values or {}).items():
        origin = _flag_origin(key, value)
        source.overrides += (origin,)
        problems += _set(data, source, _flag_home(data, key), value, origin, replaced)
    manifest = manifest_problems(data)  # before minitrain's own default name
    problems += manifest
    data.setdefault("name", default_name)
    spec_shaped = "entrenar" in data  # the spec's header; translate() removes it
    template_problems = _render_templates(data, source, env if env is not None else os.environ, now, replaced)
    refused = translate(data, source)
    problems += template_problems + _token_problems(data) + refused
    sections, schema_problems = _validate_sections(data)
    # A template that failed stays unrendered, a list entry whose kind was refused stays empty: what the schema
    # says of them would only repeat the problem.
    failed = {p.path for p in template_problems}
    failed |= {p.path[:-1] for p in refused if len(p.path) > 1 and isinstance(p.path[-2], int)}
    problems += [p for p in schema_problems
                 if not any(source.spelled(p.path)[: len(f)] == f for f in failed)]
    # A manifest's LoRA without the model's shape (§14 rule 5, or a model.source that could not tell it): its
    # targets are checked against no assumed model.
    # A key already refused (an s3:// data.source) is not reported again by a rule that misses it.
    unshaped = any(p.path == ("lora",) for p in manifest) or any(p.path == ("model", "source") for p in problems)
    reported = {p.path for p in refused}
    problems += [p for p in run_rules(sections, data) if p.path not in reported
                 and not (unshaped and p.path[:2] in (("lora", "target_modules"), ("lora", "target_modules_pattern")))]
    if problems:
        raise ConfigError(problems, source)
    cfg = Config.model_validate(data)
    if cfg.output.dir is None:  # the spec's Appendix A default for its manifests; runs/<name> for minitrain's
        cfg.output.dir = SPEC_OUTPUT_DIR if spec_shaped else cfg.output_dir
    cfg._source = source
    source.warnings += quantize_warnings(cfg.quantize, cfg.model.architecture())
    return cfg


def _token_problems(data: dict) -> list[Problem]:
    # Every value is copied into config.resolved.yaml, manifest.json and the trackers: a token must not be one.
    return [Problem(path, "looks like an access token; a config's values are written to config.resolved.yaml and "
                          "manifest.json, so minitrain reads tokens itself (HF_TOKEN for the Hub), never from a "
                          "config") for path, value in walk(data) if isinstance(value, str) and looks_like_token(value)]


def _flag_origin(key: str, value: Any) -> str:
    flag = {"training.rng_seed": "--seed", "output.dir": "--out-dir", "output.models_dir": "--models-dir"}.get(key)
    return f"{flag} {value}" if flag else f"--set {key}={value}"


def _flag_home(data: dict, key: str) -> str:
    # A flag sets the key the file spells: the spec's root seed for `--seed`, training.output_dir for `--out-dir`.
    if key == "output.dir" and isinstance(data.get("training"), dict) and "output_dir" in data["training"]:
        return "training.output_dir"
    return "seed" if key == "training.rng_seed" and "seed" in data else key


# --- overrides ----------------------------------------------------------------------------------------------


def _apply_override(data: dict, source: ConfigSource, text: str, replaced: list) -> list[Problem]:
    key, sep, raw_value = text.partition("=")
    key = key.strip()
    origin = f"--set {text}"
    if not sep or not _KEY.match(key):
        path = (key or "<set>",)
        source.origins[path] = origin
        return [Problem(path, "write an override as --set section.key=value, e.g. --set training.batch_size=16")]
    try:
        value = _override_value(raw_value)
    except YamlSyntaxError as exc:
        path = tuple(key.split("."))
        source.origins[path] = origin
        return [Problem(path, f"value is not a YAML scalar: {exc}")]
    source.overrides += (origin,)
    path = tuple(key.split("."))
    others = _DURATION - {key} if key in _DURATION else {dotted(alias) for alias in aliases(path)}
    for other in others if value is not None else ():  # a new value replaces the file's, however either spells it
        *parents, name = other.split(".")
        node = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(name, None)
    return _set(data, source, key, value, origin, replaced)


# How long to train: a new stopping point (what a resume may move), epochs or duration replaces the file's.
_DURATION = frozenset({"training.total_steps", "training.max_steps", "scheduler.total_steps", "training.epochs",
                       "training.duration"})


def _override_value(raw: str) -> Any:
    """The value of `--set key=RAW`: RAW read as a YAML scalar, except that an unquoted template stays text.

    Unquoted, `{{ env.LR }}` is YAML for a nested mapping; in a file it must be quoted, but on a command line the
    shell already ate one level of quotes, so `--set optimizer.lr_max={{ env.LR }}` is taken as the template. A
    value without `{{` is YAML, flow collections included (`--set 'data.augmentation=[{random_swap: {p: 1}}]'`).
    It is rendered with the others, and a value that is one whole template is read as YAML after rendering.
    """
    text = raw.strip()
    if "{{" in text and not text.startswith(("'", '"')):  # `}}` alone closes YAML flow: [{a: {b: 1}}]
        return text
    return parse_scalar(raw)


def _set(data: dict, source: ConfigSource, key: str, value: Any, origin: str, replaced: list) -> list[Problem]:
    """Put `value` at dotted `key`, creating sections as needed; note where it came from and, when it replaces
    a template of the file, that template (`replaced`), which is still checked."""
    path = tuple(key.split("."))
    node = data
    for depth, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
            if not _in_schema(path[: depth + 1]):
                # An unknown section exists only because of this override: report it against the override.
                source.origins.setdefault(path[: depth + 1], origin)
        if not isinstance(child, dict):
            source.origins[path] = origin
            return [Problem(path, f"{dotted(path[: depth + 1])} is not a section, so {key} cannot be set")]
        node = child
    old = node.get(path[-1])
    if isinstance(old, str) and has_template(old) and path not in source.origins:
        replaced.append((path, old))
    node[path[-1]] = value
    source.origins[path] = origin
    return []


def _in_schema(path: KeyPath) -> bool:
    parent = model_at(Config, path[:-1])
    return parent is not None and path[-1] in parent.model_fields


# --- templates ----------------------------------------------------------------------------------------------


def _render_templates(data: dict, source: ConfigSource, env: Mapping[str, str], now: dt.datetime | None,
                      replaced: list[tuple[KeyPath, str]]) -> list[Problem]:
    """Render every template (templates.py); a template of the file an override replaced is rendered too, so a
    mistake in the file is found whatever the command line says."""
    renderer = Renderer(data, env, now or dt.datetime.now(dt.UTC), aliases, _default_of)
    problems = [Problem(path, message) for path, message in renderer.render_all().items()]
    for path, text in replaced:
        try:
            render_text(text, renderer.value_of)
        except TemplateError as exc:
            line = source.lines.get(path)
            problems.append(Problem(path, f"{exc} (in the file's value{f' at line {line}' if line else ''}, "
                                          f"which {source.origins[path]} replaces)"))
    return problems


def _default_of(path: KeyPath) -> Any:
    """The schema's default for the key at `path`, under either of its names (for a template's reference);
    KeyError(message) if it has none."""
    for spelled in [path, *aliases(path)]:
        if _in_schema(spelled):
            if (value := schema_default(spelled)) is None:
                raise KeyError(f"{dotted(path)} is not set in this config (give it a value to use it in a template)")
            return value
    if refused := refusal(path):
        raise KeyError(refused)
    raise KeyError(f"unknown key '{dotted(path)}'" + unknown_key_message(Config, path).removeprefix("unknown key"))


# --- schema -------------------------------------------------------------------------------------------------


@cache
def _adapter(name: str) -> TypeAdapter:
    field = Config.model_fields[name]
    return TypeAdapter(Annotated[field.annotation, field])


def _validate_sections(data: dict) -> tuple[dict[str, Any], list[Problem]]:
    """Validate each top-level section on its own, so rules can run on the sections that are fine."""
    problems: list[Problem] = []
    sections: dict[str, Any] = {}
    for key in data:
        if key not in Config.model_fields:
            problems.append(Problem((key,), unknown_key_message(Config, (key,))))
    for name, field in Config.model_fields.items():
        try:
            value = data[name] if name in data else field.get_default(call_default_factory=True)
            sections[name] = _adapter(name).validate_python(value, strict=True)
        except ValidationError as exc:
            problems += from_validation_error(Config, exc, prefix=(name,))
    return sections, problems


def resolved_dict(cfg: Config) -> dict[str, Any]:
    """The config after defaults, overrides and templates, as plain data in schema order.

    Keys the chosen model/optimizer/scheduler type does not use are left out, so the result loads again as a
    config (a table's data section loses the language model's keys); so are the keys added since lab 01
    (`ADDED_KEYS`) while they hold their neutral value.
    """
    data = cfg.model_dump(mode="json")
    for section, table in (("model", MODEL_KEYS), ("optimizer", OPTIMIZER_KEYS), ("scheduler", SCHEDULER_KEYS)):
        used = table[data[section]["type"]]
        data[section] = {k: v for k, v in data[section].items() if k in used}
    if cfg.is_table_task:
        unused = (*LANGUAGE_DATA_KEYS, *(("train_path", "val_path") if cfg.data.source else ()))
        data["data"] = {k: v for k, v in data["data"].items() if k not in unused}
    elif cfg.on_pretrained_base:
        data["data"] = {k: v for k, v in data["data"].items() if k not in (*CHARACTER_DATA_KEYS, "format")}
    data["callbacks"] = [resolved_callback(entry) for entry in data["callbacks"]]
    for pattern, neutral in ADDED_KEYS.items():
        for path in paths_matching(data, pattern):
            if (parent := value_at(data, path[:-1]))[path[-1]] == neutral:
                del parent[path[-1]]
    if data["training"].get("val_every_epoch"):
        del data["training"]["val_every"]  # unused, and giving both is an error when the result is loaded again
    return data


def resolved_yaml(cfg: Config) -> str:
    """config.resolved.yaml: the resolved config, headed by the command-line overrides that shaped it."""
    head = ["# minitrain resolved config: defaults filled in, overrides and templates applied."]
    if cfg.source is not None and cfg.source.path:
        head.append(f"# source: {cfg.source.path}")
    for origin in cfg.source.overrides if cfg.source is not None else ():
        head.append(f"# override: {origin}")
    body = yaml.safe_dump(resolved_dict(cfg), sort_keys=False, allow_unicode=True, default_flow_style=False)
    return "\n".join(head) + "\n" + body
