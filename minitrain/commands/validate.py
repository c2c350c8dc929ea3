"""`minitrain validate CONFIG [--set k=v]... [--no-data]`: every check `train` makes before training, and a
checklist of what passed."""

from __future__ import annotations

import argparse

from minitrain.commands.common import add_set, check_files, load
from minitrain.config.datacheck import DataSummary
from minitrain.config.rules import RULES
from minitrain.config.schema import Config
from minitrain.lora import resolve_targets
from minitrain.models.registry import linear_module_paths


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config")
    add_set(parser)
    parser.add_argument("--no-data", action="store_true",
                        help="skip the checks that read files (the data, model.init_from)")
    parser.set_defaults(handler=validate_command)


def validate_command(args: argparse.Namespace) -> int:
    cfg = load(args)
    summary = None if args.no_data else check_files(cfg)
    if summary is not None and cfg.on_pretrained_base:  # the checklist shows the architecture read from the base
        from minitrain.training.text_run import complete_config

        cfg = complete_config(cfg)
    print(checklist(cfg, summary))
    return 0


def checklist(cfg: Config, summary: DataSummary | None) -> str:
    """The ✓ list `minitrain validate` prints for a valid config."""
    source = cfg.source
    n_lines = len(source.text.splitlines()) if source and source.text else 0
    lines = [
        f"✓ YAML read safely: {source.path if source else 'config'} ({n_lines} lines)",
        "✓ every key known; types and ranges valid",
        f"✓ {len(RULES)} cross-field rules pass",
        "✓ templates rendered" + (f"; overrides: {', '.join(source.overrides)}" if source and source.overrides else ""),
    ]
    if source and source.notes:
        keys = sorted(note.partition(":")[0] for note in source.notes)
        lines.append(f"– accepted, no effect: {', '.join(keys)} (docs/yaml-mode.md says why)")
    if summary is None:
        lines.append("– data files and model.init_from not checked (--no-data)")
    else:
        unit = "rows of packed tokens" if cfg.on_pretrained_base and cfg.data.packing == "pack" else "records"
        counts = ", ".join(f"{split} {n} {unit}" for split, n in summary.records.items())
        lines.append(f"✓ data: {counts}")
        if summary.table is not None:
            info = summary.table
            classes = f", {info['classes']} classes" if "classes" in info else ""
            lines.append(f"✓ {info['task']} of {info['target']!r} from {info['features']} features{classes}; the "
                         "layers' widths fit")
        else:
            lines.append(f"✓ tokenizer {summary.tokenizer_size} ids ≤ vocab_size {cfg.model.vocab_size}; longest "
                         f"record {summary.longest_input} positions ≤ max_seq_len {cfg.model.max_seq_len}")
        if cfg.model.init_from:
            lines.append(f"✓ model.init_from {cfg.model.init_from}: readable, of this architecture")
    opt, t = cfg.optimizer, cfg.training
    length = (f"{cfg.total_steps} steps of" if cfg.total_steps else f"{t.epochs} epoch{'s' * (t.epochs != 1)} of"
              if t.epochs else f"{t.duration} on the clock,")
    lines.append(f"✓ run: {length} batch {t.batch_size} × {t.grad_accumulation}, "
                 f"{opt.type} lr {opt.lr_max:g} → {opt.lr_min:g} ({cfg.scheduler.type}), output {cfg.output.dir}")
    if cfg.lora.enabled:
        targets, _ = resolve_targets(cfg.lora.target_modules, cfg.lora.target_modules_pattern,
                                     linear_module_paths(cfg.model.architecture()))
        base = f", base in 4-bit {cfg.lora.quant_type} blocks" if cfg.lora.quantize_base else ""
        lines.append(f"✓ lora: rank {cfg.lora.rank}, alpha {cfg.lora.alpha:g} on {len(targets)} linear layers{base}")
    if cfg.quantize.enabled:
        q = cfg.quantize
        lines.append(f"✓ quantize: int{q.bits} {q.scheme} {q.granularity} after training"
                     + (f", trained for it (QAT, {q.qat.observer} observer)" if q.qat.enabled else ""))
    if cfg.distillation.enabled:
        d, several = cfg.distillation, len(cfg.distillation.teachers) > 1
        teachers = ", ".join(f"{source} (weight {w:.3g})" if several else source for source, w in d.sources())
        chain = "".join(f" → {s.name} ({', '.join(s.set) or 'the same config'})" for s in d.stages)
        lines.append(f"✓ distillation from {teachers}{chain}{' → the student' if chain else ''}: T "
                     f"{d.temperature:g}, loss {d.alpha:g} · hard + {1 - d.alpha:g} · T² · KL(teacher ‖ student)")
    return "\n".join(lines) + "\nconfig is valid."
