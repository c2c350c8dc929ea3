"""The spec's manifest shape (entrenar YAML mode 1.0, docs/yaml-mode.md) read into minitrain's one schema.

A config may use lab 01's keys, the spec's keys, or both. `translate(data, source)` runs before the schema and
moves every spec key to its home in minitrain's schema, so there is one schema, one set of rules and one
resolved config (always in minitrain's keys). It remembers where each moved value came from
(`source.renamed`): a problem with `training.batch_size` is reported as `data.loader.batch_size`, at the line
where the user wrote it. Giving one setting under both names is an error naming both.

What happens to each key is in the tables of `spec_keys.py` (renamed, no effect, not yet, cannot); the
converters below handle the keys whose value changes shape (optimizer.betas [b1, b2] → beta1, beta2; the root
seed → both seeds; ...). `json_schema` adds the spec's accepted keys to minitrain's JSON Schema.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minitrain.common.errors import HUB_FAILED, UserError
from minitrain.common.hub_id import names_hub_repo
from minitrain.config.problems import Problem, did_you_mean, exit_code_of
from minitrain.config.rule import RUN_LENGTHS
from minitrain.config.source import ConfigSource, KeyPath, dotted, paths_matching, value_at, walk
from minitrain.config.spec_keys import (
    FORMAT_VERSION,
    NO_EFFECT,
    OWN_KEYS,
    RENAMED,
    SPEC_SECTIONS,
    SPEC_VERSION,
    URI_SCHEMES,
    VALUE_KINDS,
    VALUE_MAPS,
    accepted_values,
    classify,
    key_path,
    spec_keys_in,
)
from minitrain.data.gpt2_base import hub_file_cache_first
from minitrain.formats.gguf_read import base_model_type
from minitrain.formats.hf_config import MODEL_TYPES
from minitrain.models.registry import FAMILIES

_NOT_GIVEN, _MISSING = object(), object()


class _Translation:
    """One translation: the document, where problems and notes go, and the helpers that move values."""

    def __init__(self, data: dict, source: ConfigSource) -> None:
        self.data, self.source = data, source
        self.problems: list[Problem] = []
        self.spec_shaped = False  # the file has the spec's `entrenar:` header

    def problem(self, path: KeyPath, message: str) -> None:
        self.problems.append(Problem(path, message))

    def get(self, path: KeyPath, default: Any = _NOT_GIVEN) -> Any:
        """The value at `path`; `default` where the document holds none (KeyError when no default is given)."""
        try:
            return value_at(self.data, path)
        except KeyError:
            if default is _NOT_GIVEN:
                raise
            return default

    def pop(self, path: KeyPath, default: Any = _NOT_GIVEN) -> Any:
        """Remove the value at `path` and return it; `default` where the document holds none."""
        if default is not _NOT_GIVEN and self.get(path, _MISSING) is _MISSING:
            return default
        return self.get(path[:-1]).pop(path[-1])

    def put(self, home: KeyPath, value: Any, spelled: KeyPath) -> None:
        """Set `home` to `value`, which the user wrote at `spelled`; an error if `home` is already given."""
        node = self.data
        for part in home[:-1]:
            # a list item (optimizer.groups[0]) exists: the value came from it
            child = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
            if not isinstance(child, dict | list):
                return  # the section is not a mapping: the schema reports it
            node = child
        if node.get(home[-1]) is not None:
            first = self.source.renamed.get(home, home)
            self.problem(spelled, f"also given as {dotted(first)}; give it in one place only")
            return
        node[home[-1]] = value
        self.source.renamed[home] = self.source.spelled(spelled)  # through any move of a section above it


def translate(data: dict, source: ConfigSource) -> list[Problem]:
    """Move every spec key of `data` (in place) to its minitrain home; the problems found on the way.

    Refused keys are removed (with a problem naming why), keys without effect are removed (with a note in
    `source.notes`), so the schema sees only minitrain's keys, plus any key that is neither: that one it
    reports as unknown, with a suggestion.
    """
    t = _Translation(data, source)
    _headers(t)
    _switch_on_present_sections(t)
    _refuse_and_note(t)
    for spec, home in RENAMED.items():
        for path in paths_matching(t.data, key_path(spec)):
            _move(t, path, key_path(home), VALUE_MAPS.get(spec))
    for convert in CONVERTERS:
        convert(t)
    _drop_spec_sections(t)
    _appendix_a_defaults(t)
    return t.problems


def _move(t: _Translation, path: KeyPath, home_pattern: KeyPath, value_map: dict | None) -> None:
    home = tuple(path[i] if part == "*" else part for i, part in enumerate(home_pattern))
    value = t.pop(path)
    if value is None:
        return  # the spec writes null for "not set" (clip_value: null)
    if value_map is not None and isinstance(value, str | bool) and value in value_map:
        value = value_map[value]
    t.put(home, value, path)


def manifest_problems(data: dict) -> list[Problem]:
    """What a spec manifest (a file with the `entrenar:` header) must give, checked before minitrain fills in its
    own defaults: the spec's required fields (§14 rule 1: entrenar, name, version), and its rule that LoRA
    targets need the model's architecture (§14 rule 5: model.architecture, or minitrain's own shape keys)."""
    if "entrenar" not in data:
        return []
    problems = [Problem((key,), f"required in a spec manifest (entrenar: ...): give the experiment's {key}")
                for key in ("name", "version") if data.get(key) is None]
    lora, model = data.get("lora"), data.get("model")
    lora_on = isinstance(lora, dict) and lora.get("enabled", True) is not False
    if lora_on and not (isinstance(model, dict) and (any(key in model for key in SHAPE_KEYS)
                                                     or _reads_its_architecture(model.get("source")))):
        problems.append(Problem(("lora",), "a spec manifest's LoRA needs model.architecture (the base's shape, "
                                           "which `minitrain init --base` writes), so its target_modules can be "
                                           "checked"))
    return problems


SHAPE_KEYS = ("architecture", "d_model", "n_layer", "layers", "hidden")  # the spec's and minitrain's


def _reads_its_architecture(source: Any) -> bool:
    """A model.source whose architecture `_model_source` reads: a .gguf file, a folder's or Hub repo's config.json."""
    return isinstance(source, str) and (source.startswith("hf://") or source.lower().endswith(".gguf")
                                        or Path(source, "config.json").is_file())


# The spec's Appendix A defaults where minitrain's own differ (docs/yaml-mode.md, "The spec's manifest shape"); a
# spec manifest gets these, a minitrain config keeps lab 01's. Each record: the key, its default, and the places
# where the user may write the same setting otherwise (§9's checkpoint callback keeps the best model by its own
# save_best): a default yields to what the user wrote, never conflicts with it. The run's length: 10 epochs
# unless one is given.
APPENDIX_A: dict[KeyPath, tuple[Any, tuple[KeyPath, ...]]] = {
    ("training", "batch_size"): (32, ()), ("training", "drop_last"): (False, ()),
    ("training", "checkpoint", "save_every"): (1000, ()),
    ("training", "checkpoint", "save_best"): (True, (("callbacks", "*", "config", "save_best"),)),
}
# The ratios of a data.split that gives none of them (§15.1's split of only a seed): Appendix A's.
SPLIT_RATIOS = {"train": 0.8, "val": 0.1, "test": 0.1}


def _appendix_a_defaults(t: _Translation) -> None:
    """Give a spec manifest the spec's defaults (APPENDIX_A, 10 epochs) for the keys it leaves out."""
    if not t.spec_shaped:
        return
    unset = [path for path, (_, elsewhere) in APPENDIX_A.items() if t.get(path, _MISSING) is _MISSING  # null: given
             and not any(paths_matching(t.data, other) for other in elsewhere)]
    if all(t.get(path, None) is None for path in RUN_LENGTHS):
        unset.append(("training", "epochs"))
    for path in unset:
        node = t.data
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else None
        if isinstance(node, dict):  # not a mapping: the schema reports it
            node[path[-1]] = APPENDIX_A.get(path, (10,))[0]
    split = t.get(("data", "split"), None)
    if isinstance(split, dict) and not set(split) & set(SPLIT_RATIOS):
        split.update(SPLIT_RATIOS)


def _headers(t: _Translation) -> None:
    if (version := t.pop(("entrenar",), _MISSING)) is not _MISSING:
        t.spec_shaped = True
        if str(version) != SPEC_VERSION:
            t.problem(("entrenar",), f"this minitrain reads version {SPEC_VERSION} of the YAML-mode spec "
                                     f'(entrenar: "{SPEC_VERSION}"), not {version!r}')
    version = t.pop(("minitrain",), FORMAT_VERSION)  # left out: nothing to check
    if version != FORMAT_VERSION or isinstance(version, bool):
        t.problem(("minitrain",), f"config format {FORMAT_VERSION} is the only one (minitrain: {FORMAT_VERSION}), "
                                  f"not {version!r}")


def _refuse_and_note(t: _Translation) -> None:
    for path, value in list(walk(t.data)):
        if t.get(path, _MISSING) is _MISSING:
            continue  # a parent refused earlier took it away
        if path[-1:] == ("source",) and isinstance(value, str) and _uri_problem(t, path, value):
            t.pop(path)
            continue
        found = classify(path, value)
        if found is None:
            continue
        kind, reason, rule = found
        if kind == "no_effect":
            if not VALUE_KINDS[rule][0](value):
                t.problem(path, f"must be {VALUE_KINDS[rule][1]} (got {value!r})")
            else:
                t.source.notes.append(f"{dotted(path)}: accepted, no effect ({reason})")
        elif kind == "not_yet":
            t.problem(path, f"not supported yet: {reason}")
        else:
            t.problem(path, f"not supported: {reason}")  # each reason says its cause (the CPU, a service...)
        t.pop(path)
    for listed in {key.partition("=")[0] for key in NO_EFFECT if "=" in key}:
        path = key_path(listed)
        if (value := t.get(path, _MISSING)) is _MISSING:
            continue
        allowed = accepted_values(path)
        t.problem(path, f"must be {' or '.join(allowed)} (got {value!r})")
        t.pop(path)


def _uri_problem(t: _Translation, path: KeyPath, value: str) -> bool:
    """Report a source URI minitrain cannot read (True), or leave it to the tables (False)."""
    scheme = value.split("://", 1)[0] + "://" if "://" in value else None
    if scheme is None or path not in (("model", "source"), ("data", "source")):
        return False
    if scheme not in URI_SCHEMES:
        t.problem(path, f"{scheme} is not a source minitrain reads (a local path, or hf://user/repo for a model)")
        return True
    reason = URI_SCHEMES[scheme]
    if reason is not None:
        t.problem(path, f"not supported: {reason}")
        return True
    return False


# --- converters: keys whose value changes shape -----------------------------------------------------------------


def _model_source(t: _Translation) -> None:
    """model.source hf://user/repo is model.init_from user/repo (a Hub id); a local path stays as it is. In a spec
    manifest, and for the publish spec's model.path, the source's own architecture gives model.type (a type written
    must be the same) and a LoRA naming no target_modules that family's linear layers (init --base's)."""
    home, spelled, path = ("model", "init_from"), t.source.renamed.get(("model", "init_from")), ("model", "path")
    value = t.get(home, None)
    if spelled not in (("model", "source"), path) or not isinstance(value, str):
        return
    spec = t.data["model"]["init_from"] = value.removeprefix("hf://")
    if not t.spec_shaped and spelled != path:
        return
    hub = value.startswith("hf://") or (spelled == path and names_hub_repo(spec))
    try:
        config = hub_file_cache_first(spec, "config.json") if hub else None
        family = _family_of(base_model_type(config.parent if config else spec))
    except UserError as exc:  # the file cannot be read: said once, here
        t.problems.append(Problem(spelled, str(exc), exit_code_of(exc)))
        family = _family_of("llama") if spec.lower().endswith(".gguf") else None  # minitrain's GGUF bases
    except (OSError, ValueError) as exc:  # the Hub client's errors (no such repo, an invalid id, the network)
        t.problems.append(Problem(spelled, f"{value}: its config.json cannot be read from the Hub "
                                           f"({type(exc).__name__}); give model.architecture.type", HUB_FAILED))
        return
    given, typed = t.get(("model", "type"), None), t.source.renamed.get(("model", "type"), ("model", "type"))
    if family is None and config is None and hub and given is None and t.get(("lora",), None):
        t.problems.append(Problem(spelled, f"{value}: no config.json to read its architecture from (none in the "
                                           "repo, or offline and not in the local Hugging Face cache); give "
                                           "model.architecture.type for its LoRA", HUB_FAILED))
    if family is None:
        return
    if given not in (None, family) and not any(p.path == spelled for p in t.problems):
        t.problem(typed, f"the {given} family, but {dotted(spelled)} {value} is a {family} model; leave it out (the "
                         f"source's architecture is read) or make it {family}")
    t.data["model"]["type"] = family  # the rules check the rest against the source's family: one error, not three
    if isinstance(lora := t.data.get("lora"), dict) and "target_modules" not in lora and FAMILIES[family].lora_targets:
        lora["target_modules"] = list(FAMILIES[family].lora_targets)


def _family_of(model_type: Any) -> str | None:
    """The family reading a base of this Hugging Face model_type: llama for Llama, Qwen2, Mistral; minigpt, GPT-2."""
    bases = {"gpt2": "gpt2", **dict.fromkeys(MODEL_TYPES, "any")}.get(model_type)
    return next((name for name, family in FAMILIES.items() if family.pretrained == bases), None) if bases else None


def _betas(t: _Translation) -> None:
    """optimizer.betas [b1, b2] is beta1 and beta2."""
    if (betas := t.pop(("optimizer", "betas"), _MISSING)) is _MISSING:
        return
    numbers = isinstance(betas, list) and len(betas) == 2 and all(
        isinstance(b, int | float) and not isinstance(b, bool) for b in betas)
    if not numbers:
        t.problem(("optimizer", "betas"), f"write betas: [0.9, 0.95] (two numbers) or beta1/beta2 (got {betas!r})")
        return
    for i, beta in enumerate(betas):
        t.put(("optimizer", f"beta{i + 1}"), beta, ("optimizer", "betas", i))


# Sections with an `enabled` switch, and the one rule for them: a section that is present is on unless it says
# `enabled: false` (the spec's own `lora: {rank: 4, alpha: 8}` means LoRA); a section left out is off.
# training.early_stopping has no switch in minitrain's schema: its presence is the switch, so `enabled: false`
# removes it.
SWITCHED_SECTIONS = (("lora",), ("quantize",), ("quantize", "qat"), ("pruning",), ("training", "early_stopping"),
                     ("monitoring", "tracking"), ("monitoring", "system"), ("training", "mixed_precision"),
                     ("distillation",))
_PRESENCE_SWITCHED = (("training", "early_stopping"),)


def _switch_on_present_sections(t: _Translation) -> None:
    """Give every section of SWITCHED_SECTIONS that is present and says nothing `enabled: true`."""
    for path in SWITCHED_SECTIONS:
        if not isinstance(node := t.get(path, None), dict):
            continue  # absent, or not a mapping: the schema reports it
        if path not in _PRESENCE_SWITCHED:
            node.setdefault("enabled", True)
        elif "enabled" in node:
            enabled = node.pop("enabled")
            if not isinstance(enabled, bool):
                t.problem((*path, "enabled"), f"must be true or false (got {enabled!r})")
            elif not enabled:
                t.pop(path)


DRAWN_SEEDS = 2**31  # a drawn seed is one a person can read and type again


def _seed(t: _Translation) -> None:
    """The root seed is training.rng_seed, and seed + 1 is training.data_seed unless the data seed is given.

    `seed: null` is the spec's "random" (Appendix A): a seed drawn from the OS's entropy now, and then the same as
    a seed written in the file, so config.resolved.yaml and manifest.json record it and `--seed N` repeats the run.
    """
    if (seed := t.pop(("seed",), _MISSING)) is _MISSING:
        return
    training = t.data.get("training")
    if seed is None and isinstance(training, dict) and training.get("rng_seed") is not None:
        return  # null is "not set": the training seed given beside it is the seed
    if seed is None:
        seed = t.source.drawn_seed = secrets.randbelow(DRAWN_SEEDS)
        t.source.warnings.append(f"seed: null: drew seed {seed} from the OS's entropy (recorded in the run's "
                                 f"config.resolved.yaml); --seed {seed} repeats this run")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63 - 1:
        t.problem(("seed",), f"must be an integer from 0 to 2**63 - 2 (got {seed!r})")
        return
    training = t.data.setdefault("training", {})
    if not isinstance(training, dict):
        return
    t.put(("training", "rng_seed"), seed, ("seed",))
    if training.get("data_seed") is None:
        t.put(("training", "data_seed"), seed + 1, ("seed",))


def _effective_batch_size(t: _Translation) -> None:
    """training.effective_batch_size (the spec's computed value) must equal batch_size × grad_accumulation."""
    if (value := t.pop(("training", "effective_batch_size"), _MISSING)) is _MISSING:
        return
    batch, accumulation = t.get(("training", "batch_size"), 8), t.get(("training", "grad_accumulation"), 1)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (value, batch, accumulation)):
        if not isinstance(value, int) or isinstance(value, bool):
            t.problem(("training", "effective_batch_size"), f"must be an integer (got {value!r})")
        return
    if value != batch * accumulation:
        t.problem(("training", "effective_batch_size"),
                  f"is {value}, but batch_size {batch} × grad_accumulation {accumulation} = {batch * accumulation}; "
                  "minitrain computes it, so it may be left out")


def _callback_scripts(t: _Translation) -> None:
    """A callback's `script:` (code in the config) is refused: a custom callback names a Python function."""
    callbacks = t.data.get("callbacks")
    for i, entry in enumerate(callbacks if isinstance(callbacks, list) else []):
        if isinstance(entry, dict) and "script" in entry:
            entry.pop("script")
            t.problem(("callbacks", i, "script"), "minitrain never runs code written in a config; put it in a "
                                                  "function def f(ctx) of a module and give entry_point: "
                                                  "'module:f' (docs/callbacks.md)")


def _gpu_metrics(t: _Translation) -> None:
    """GPU metrics in monitoring.system.metrics are refused: minitrain runs on the CPU."""
    metrics = t.get(("monitoring", "system", "metrics"), None)
    for i, metric in reversed(list(enumerate(metrics if isinstance(metrics, list) else []))):
        if isinstance(metric, str) and metric.startswith("gpu_"):
            t.problem(("monitoring", "system", "metrics", i), f"{metric}: minitrain trains on the CPU, there is "
                                                             "no GPU to measure; it measures cpu_percent, memory_mb "
                                                             "and disk_io")
            del metrics[i]


CONVERTERS: list[Callable[[_Translation], None]] = [
    _model_source, _betas, _seed, _effective_batch_size, _callback_scripts, _gpu_metrics,
]


def _drop_spec_sections(t: _Translation) -> None:
    for section in SPEC_SECTIONS:
        path = key_path(section)
        if (node := t.get(path, _MISSING)) is _MISSING:
            continue
        if isinstance(node, dict):
            known = spec_keys_in(key_path(section))
            for key in node:
                hint = did_you_mean(str(key), known) or f"; known here: {', '.join(known)}"
                t.problem((*path, key), f"unknown key{hint}")
        elif node is not None:
            t.problem(path, f"must be a mapping of {', '.join(spec_keys_in(key_path(section)))}")
        t.pop(path)


# --- the JSON Schema -------------------------------------------------------------------------------------------


def json_schema(schema: dict) -> dict:
    """minitrain's JSON Schema (`Config.model_json_schema()`) with the spec's accepted keys added beside
    minitrain's: each renamed key takes its minitrain key's schema, each key without effect its type, so an
    editor completes and checks either shape. Refused keys stay out, so an editor flags them."""
    for spec, home in RENAMED.items():
        target = _schema_at(schema, key_path(home))
        if target is None:
            continue
        entry = {**copy.deepcopy(target), "description": f"the spec's name for {home}"}
        if spec in VALUE_MAPS:  # the spec's own words for the values (cosine_annealing, true/false)
            entry = {"enum": [*VALUE_MAPS[spec], *target.get("enum", [])], "description": entry["description"]}
        _add(schema, key_path(spec), entry)
        parent = _resolve(schema, _schema_at(schema, key_path(home)[:-1]) or schema)
        if key_path(spec)[:-1] == key_path(home)[:-1] and key_path(home)[-1] in parent.get("required", []):
            # the item's required key may come under either name (param_groups[].params is groups[].pattern)
            parent["required"].remove(key_path(home)[-1])
            parent["anyOf"] = [{"required": [key_path(home)[-1]]}, {"required": [key_path(spec)[-1]]}]
    for key, extra in OWN_KEYS.items():
        _add(schema, key_path(key), extra)
    for key, (kind, reason) in NO_EFFECT.items():
        path, _, value = key.partition("=")
        node = _add(schema, key_path(path), {**VALUE_KINDS[kind][2], "description": f"no effect: {reason}"})
        if value:
            node.setdefault("enum", []).append(True if value == "true" else False if value == "false" else value)
    return schema


def _resolve(schema: dict, node: dict) -> dict:
    """`node` with its $ref (possibly inside anyOf, as pydantic writes an optional section) followed."""
    for option in [node, *node.get("anyOf", [])]:
        if "$ref" in option:
            return schema["$defs"][option["$ref"].rsplit("/", 1)[-1]]
    return node


def _schema_at(schema: dict, path: KeyPath) -> dict | None:
    node = schema
    for part in path:
        node = _resolve(schema, node)
        child = node.get("items") if part == "*" else node.get("properties", {}).get(part)
        if child is None:
            return None
        node = child
    return node


def _add(schema: dict, path: KeyPath, entry: dict) -> dict:
    """Put `entry` at `path`, creating the spec's own sections (data.loader...) as closed objects; returns the
    entry there (an existing one is kept, so a key listed twice with values collects them)."""
    node = schema
    for part in path[:-1]:
        node = _resolve(schema, node)
        if part == "*":
            node = node["items"]
            continue
        node = node.setdefault("properties", {}).setdefault(
            part, {"type": "object", "additionalProperties": False, "properties": {}})
    node = _resolve(schema, node)
    return node.setdefault("properties", {}).setdefault(path[-1], entry)
