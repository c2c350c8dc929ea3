"""Every example of the two specs (docs/spec-coverage.md): each YAML block and command line of
simplify-publish-spec.txt and yaml-mode-spec.txt, copied here verbatim with its section, is run the cheapest honest
way and given a verdict the test computes: works, refused (the one error line), or missing (an unknown key, command
or flag). No snippet may end in a traceback, and docs/spec-coverage.md must be the table computed here; write it with
`MINITRAIN_WRITE_SPEC_COVERAGE=1 pytest tests/test_spec_coverage.py`.

A YAML block runs as `minitrain validate --no-data` (its keys and values, not its files or downloads); a
yaml-mode section given alone runs in a manifest: §1.1's required entrenar/name/version keys appended, so
Appendix A's defaults apply. A command runs as written, `entrenar` read as `minitrain`, in a fresh copy of one
workspace: ./base a tiny Llama folder, ./data and ./my-data a few chat records, config.yaml what the spec's own
`init --base ... --method qlora` wrote, config.lock.yaml its lock, ./output a finished tiny run. The only swaps,
each named in its row: the Hub id Qwen/Qwen2.5-Coder-0.5B becomes ./base, `train` and `publish` get --dry-run
(nothing trained, nothing uploaded), and a `# comment` is dropped. The publish spec's PublishArgs (Rust) is
checked field by field against `minitrain publish --help`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import traceback
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from fakehub import make_run
from test_hub_pretrained import hf_folder

from minitrain import cli

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "spec-coverage.md"
SPECS = {"publish": "simplify-publish-spec.txt", "yaml": "yaml-mode-spec.txt"}
HUB_ID, TINY_BASE = "Qwen/Qwen2.5-Coder-0.5B", "./base"
MANIFEST_ROOT = 'entrenar: "1.0"\nname: "spec-example"\nversion: "1.0.0"\n'  # §1.1: required in a manifest
CHAT = [{"messages": [{"role": "user", "content": f"hola {i}"}, {"role": "assistant", "content": "como"}]}
        for i in range(20)]


@dataclass(frozen=True)
class Snippet:
    spec: str  # a key of SPECS
    section: str
    kind: str  # "yaml", "cmd" or "flags" (a command's options, as the spec's Rust declares them)
    raw: str  # the spec's text after a leading newline

    @property
    def text(self) -> str:
        return self.raw[1:]


SNIPPETS = [
    Snippet("publish", "§1", "cmd", r"""
entrenar init --base Qwen/Qwen2.5-Coder-0.5B --method qlora --data ./my-data/
"""),
    Snippet("publish", "§1", "cmd", r"""
entrenar train config.yaml
"""),
    Snippet("publish", "§1", "cmd", r"""
entrenar publish --repo myuser/my-finetuned-model
"""),
    Snippet("publish", "§1", "cmd", r"""
entrenar train config.yaml   # trains AND publishes
"""),
    Snippet("publish", "§3.1", "cmd", r"""
entrenar publish --repo myuser/my-model ./output/
"""),
    Snippet("publish", "§3.1", "flags", r"""
pub struct PublishArgs {
    /// HuggingFace repo ID (e.g., myuser/my-model)
    #[arg(long)]
    pub repo: String,

    /// Path to trained model output directory
    #[arg(default_value = "./output")]
    pub model_dir: PathBuf,

    /// Make the repository private
    #[arg(long)]
    pub private: bool,

    /// Generate and upload a model card
    #[arg(long, default_value_t = true)]
    pub model_card: bool,

    /// Merge LoRA adapters before publishing
    #[arg(long)]
    pub merge_adapters: bool,

    /// Base model for adapter merging (HF repo ID or local path)
    #[arg(long)]
    pub base_model: Option<String>,

    /// Export format (safetensors or gguf)
    #[arg(long, default_value = "safetensors")]
    pub format: String,
}
"""),
    Snippet("publish", "§3.2", "yaml", r"""
model:
  path: Qwen/Qwen2.5-Coder-0.5B   # auto-detected as HF repo ID
  # OR
  path: ./local-model.safetensors   # local file (existing behavior)
"""),
    Snippet("publish", "§3.3", "yaml", r"""
model:
  path: Qwen/Qwen2.5-Coder-0.5B

data:
  train_path: ./data/train.jsonl
  batch_size: 8

optimizer:
  name: adamw
  lr: 2e-4

lora:
  rank: 64
  alpha: 16

training:
  epochs: 3
  output_dir: ./output

# NEW: auto-publish after training completes
publish:
  repo: myuser/qwen-finetuned
  private: false
  model_card: true
  merge_adapters: true
"""),
    Snippet("publish", "§3.4", "cmd", r"""
entrenar init --base Qwen/Qwen2.5-Coder-0.5B --method qlora --data ./my-data/
"""),
    Snippet("publish", "§4.1", "cmd", r"""
entrenar init --base Qwen/Qwen2.5-Coder-0.5B --method qlora --data ./data/
"""),
    Snippet("publish", "§4.1", "cmd", r"""
entrenar train config.yaml
"""),
    Snippet("publish", "§4.1", "cmd", r"""
entrenar publish --repo myuser/qwen-rust-coder ./output/
"""),
    Snippet("publish", "§4.2", "cmd", r"""
entrenar train config.yaml
"""),
    Snippet("yaml", "§1.1", "yaml", r"""
# entrenar training manifest v1.0
entrenar: "1.0"                    # Required: Specification version
name: "experiment-name"            # Required: Experiment identifier
version: "1.0.0"                   # Required: Experiment version
description: "..."                 # Optional: Human-readable description
seed: 42                           # Optional: Global random seed (reproducibility)

# Training configuration sections (all optional with sensible defaults)
data: { ... }                      # Dataset configuration
model: { ... }                     # Model architecture/loading
optimizer: { ... }                 # Optimization algorithm
scheduler: { ... }                 # Learning rate scheduling
training: { ... }                  # Training loop parameters
lora: { ... }                      # LoRA fine-tuning (optional)
quantize: { ... }                  # Quantization settings (optional)
monitoring: { ... }                # Real-time monitoring (optional)
callbacks: { ... }                 # Training callbacks (optional)
output: { ... }                    # Output and artifact settings
"""),
    Snippet("yaml", "§2.1", "yaml", r"""
data:
  # Source specification (required)
  source: "pacha://datasets/mnist:1.0"   # PAIML Registry
  # OR
  source: "hf://ylecun/mnist"            # HuggingFace Hub
  # OR
  source: "./data/train.parquet"         # Local file
  # OR
  source: "s3://bucket/path/data.ald"    # S3 (requires AWS credentials)

  # Format detection (auto-detected if omitted)
  format: "parquet"                       # parquet, csv, json, ald, arrow

  # Data splitting (mutually exclusive with explicit train/val/test)
  split:
    train: 0.8
    val: 0.1
    test: 0.1
    stratify: "label"                     # Column for stratified sampling
    seed: 42                              # Split seed (inherits global if omitted)

  # OR explicit paths
  train: "./data/train.parquet"
  val: "./data/val.parquet"
  test: "./data/test.parquet"

  # Preprocessing pipeline
  preprocessing:
    - normalize:
        columns: [pixel_0, pixel_1, ..., pixel_783]
        method: "minmax"                  # minmax, zscore, robust
    - encode:
        columns: [category]
        method: "onehot"                  # onehot, label, ordinal
    - drop:
        columns: [id, timestamp]
    - fillna:
        strategy: "mean"                  # mean, median, mode, constant
        value: 0                          # For constant strategy

  # DataLoader settings
  loader:
    batch_size: 32
    shuffle: true
    num_workers: 4
    pin_memory: true
    drop_last: false
    prefetch_factor: 2
"""),
    Snippet("yaml", "§2.2", "yaml", r"""
data:
  augmentation:
    # Image augmentations
    - random_crop:
        size: [224, 224]
        padding: 4
    - horizontal_flip:
        probability: 0.5
    - color_jitter:
        brightness: 0.2
        contrast: 0.2
        saturation: 0.2
    - normalize:
        mean: [0.485, 0.456, 0.406]
        std: [0.229, 0.224, 0.225]

    # Text augmentations
    - random_swap:
        probability: 0.1
    - random_delete:
        probability: 0.1
    - back_translate:
        languages: [de, fr]
        probability: 0.2
"""),
    Snippet("yaml", "§3.1", "yaml", r"""
model:
  # Load from PAIML Registry
  source: "pacha://models/llama2-7b:1.0"

  # OR HuggingFace Hub
  source: "hf://meta-llama/Llama-2-7b"

  # OR local file
  source: "./models/base.safetensors"
  format: "safetensors"                   # safetensors, gguf, apr, pt

  # Architecture override (for custom models)
  architecture:
    type: "transformer"
    hidden_size: 4096
    num_layers: 32
    num_heads: 32
    vocab_size: 32000
    max_seq_length: 4096

  # Layer freezing
  freeze:
    - "embed_tokens"
    - "layers.0"
    - "layers.1"

  # Device placement
  device: "auto"                          # auto, cpu, cuda, cuda:0, mps
  dtype: "float16"                        # float32, float16, bfloat16
"""),
    Snippet("yaml", "§3.2", "yaml", r"""
model:
  architecture:
    type: "sequential"
    layers:
      - linear:
          in_features: 784
          out_features: 256
          bias: true
      - activation: "relu"
      - dropout: 0.2
      - linear:
          in_features: 256
          out_features: 128
      - activation: "relu"
      - dropout: 0.2
      - linear:
          in_features: 128
          out_features: 10
      - activation: "softmax"
"""),
    Snippet("yaml", "§4.1", "yaml", r"""
optimizer:
  name: "adamw"                           # sgd, adam, adamw, rmsprop, adagrad, lamb

  # Common parameters
  lr: 0.001                               # Learning rate
  weight_decay: 0.01                      # L2 regularization

  # Adam/AdamW specific
  betas: [0.9, 0.999]
  eps: 1e-8
  amsgrad: false

  # SGD specific
  momentum: 0.9
  nesterov: true
  dampening: 0

  # RMSprop specific
  alpha: 0.99
  centered: false

  # Per-parameter groups (advanced)
  param_groups:
    - params: "model.encoder.*"
      lr: 0.0001
    - params: "model.decoder.*"
      lr: 0.001
    - params: "model.head.*"
      lr: 0.01
      weight_decay: 0
"""),
    Snippet("yaml", "§4.2", "yaml", r"""
scheduler:
  name: "cosine_annealing"                # step, cosine, linear, exponential, plateau

  # Warmup (works with any scheduler)
  warmup:
    steps: 1000                           # OR ratio: 0.1
    start_lr: 1e-7

  # Cosine annealing
  T_max: 10000                            # Max iterations
  eta_min: 1e-6                           # Minimum LR

  # Step scheduler
  step_size: 1000
  gamma: 0.1

  # Plateau scheduler
  mode: "min"                             # min, max
  factor: 0.1
  patience: 10
  threshold: 0.0001

  # One-cycle (super-convergence) [3]
  max_lr: 0.01
  pct_start: 0.3
  anneal_strategy: "cos"
  div_factor: 25
  final_div_factor: 10000
"""),
    Snippet("yaml", "§5.1", "yaml", r"""
training:
  # Duration (mutually exclusive)
  epochs: 10                              # Number of epochs
  # OR
  max_steps: 10000                        # Maximum training steps
  # OR
  duration: "2h"                          # Maximum wall-clock time

  # Gradient settings
  gradient:
    accumulation_steps: 4                 # Effective batch = batch_size * accum
    clip_norm: 1.0                        # Gradient clipping (L2 norm)
    clip_value: null                      # Gradient clipping (absolute value)

  # Mixed precision training [4]
  mixed_precision:
    enabled: true
    dtype: "float16"                      # float16, bfloat16
    loss_scale: "dynamic"                 # dynamic, static, or float value

  # Distributed training
  distributed:
    strategy: "ddp"                       # ddp, fsdp, deepspeed
    world_size: 4
    gradient_as_bucket_view: true
    find_unused_parameters: false

  # Checkpointing
  checkpoint:
    save_every: 1000                      # Steps between checkpoints
    keep_last: 3                          # Number of checkpoints to retain
    save_best: true                       # Save best model by metric
    metric: "val_loss"                    # Metric for best model selection
    mode: "min"                           # min or max

  # Early stopping (Jidoka - automatic halt on quality degradation)
  early_stopping:
    enabled: true
    metric: "val_loss"
    patience: 5
    min_delta: 0.001
    mode: "min"
"""),
    Snippet("yaml", "§5.2", "yaml", r"""
training:
  validation:
    every: 100                            # Validate every N steps
    # OR
    every_epoch: true                     # Validate each epoch

    metrics:
      - accuracy
      - precision
      - recall
      - f1
      - auc_roc
      - confusion_matrix

    # Cross-validation (alternative to holdout)
    cross_validation:
      folds: 5
      stratified: true
      shuffle: true
"""),
    Snippet("yaml", "§6", "yaml", r"""
lora:
  enabled: true

  # Core LoRA parameters
  rank: 16                                # Rank of low-rank matrices (r)
  alpha: 32                               # Scaling factor (α)
  dropout: 0.05                           # LoRA dropout

  # Target modules (architecture-specific)
  target_modules:
    - q_proj
    - k_proj
    - v_proj
    - o_proj
    - gate_proj
    - up_proj
    - down_proj

  # Module pattern matching (regex)
  target_modules_pattern: ".*\\.self_attn\\.(q|k|v|o)_proj"

  # Bias training
  bias: "none"                            # none, all, lora_only

  # Initialization
  init_weights: "gaussian"                # gaussian, xavier, kaiming

  # QLoRA (quantized LoRA) [6]
  quantize_base: true
  quantize_bits: 4
  double_quantize: true
  quant_type: "nf4"                       # nf4, fp4
"""),
    Snippet("yaml", "§7", "yaml", r"""
quantize:
  enabled: true

  # Quantization scheme
  bits: 4                                 # 2, 4, 8
  scheme: "symmetric"                     # symmetric, asymmetric, dynamic
  granularity: "per_channel"              # per_tensor, per_channel, per_group
  group_size: 128                         # For per_group quantization

  # Quantization-aware training (QAT)
  qat:
    enabled: false
    observer: "histogram"                 # minmax, histogram, percentile

  # Post-training quantization (PTQ)
  calibration:
    samples: 512
    method: "percentile"                  # minmax, percentile, mse
    percentile: 99.99

  # Layers to exclude from quantization
  exclude:
    - "lm_head"
    - "embed_tokens"
"""),
    Snippet("yaml", "§8", "yaml", r"""
monitoring:
  # Terminal visualization
  terminal:
    enabled: true
    refresh_rate: 100                     # ms between updates
    metrics:
      - loss
      - accuracy
      - learning_rate
      - throughput
    charts:
      - type: "sparkline"
        metric: "loss"
        window: 100
      - type: "progress"
        show_eta: true

  # Experiment tracking (trueno-db integration)
  tracking:
    enabled: true
    backend: "trueno-db"                  # trueno-db, mlflow, wandb, tensorboard
    project: "my-project"
    experiment: "{{ name }}-{{ timestamp }}"
    tags:
      model: "{{ model.source }}"
      dataset: "{{ data.source }}"

  # System metrics
  system:
    enabled: true
    interval: 1000                        # ms
    metrics:
      - cpu_percent
      - memory_mb
      - gpu_utilization
      - gpu_memory_mb
      - disk_io

  # Alerts (Andon system)
  alerts:
    - condition: "loss > 10"
      action: "warn"
      message: "Loss explosion detected"
    - condition: "loss.stall(50)"
      action: "warn"
      message: "Loss stalled for 50 steps"
    - condition: "gpu_memory > 0.95"
      action: "halt"
      message: "GPU OOM imminent"
"""),
    Snippet("yaml", "§9", "yaml", r"""
callbacks:
  # Model checkpointing
  - type: "checkpoint"
    trigger: "epoch_end"
    config:
      save_best: true
      metric: "val_loss"

  # Learning rate logging
  - type: "lr_monitor"
    trigger: "step"

  # Gradient statistics
  - type: "gradient_monitor"
    trigger: "step"
    interval: 100
    config:
      log_histogram: true

  # Sample predictions
  - type: "sample_predictions"
    trigger: "epoch_end"
    config:
      num_samples: 10

  # Custom callback (advanced)
  - type: "custom"
    trigger: "step"
    interval: 1000
    script: |
      if step % 1000 == 0:
          save_attention_maps(model, batch)
"""),
    Snippet("yaml", "§10", "yaml", r"""
output:
  # Output directory
  dir: "./experiments/{{ name }}/{{ timestamp }}"

  # Model saving
  model:
    format: "safetensors"                 # safetensors, pt, gguf, apr
    save_optimizer: true
    save_scheduler: true

  # Metrics export
  metrics:
    format: "parquet"                     # parquet, csv, json
    include:
      - train_loss
      - val_loss
      - accuracy
      - learning_rate

  # Training report
  report:
    enabled: true
    format: "markdown"                    # markdown, html, pdf
    include_plots: true

  # Artifact registry
  registry:
    enabled: true
    target: "pacha://models/{{ name }}:{{ version }}"
    include_config: true
    include_metrics: true
"""),
    Snippet("yaml", "§11", "yaml", r"""
entrenar: "1.0"
name: "llama2-alpaca-finetune"
version: "1.0.0"
description: "Fine-tune LLaMA-2-7B on Alpaca dataset using QLoRA"
seed: 42

data:
  source: "hf://tatsu-lab/alpaca"
  split:
    train: 0.9
    val: 0.1
    seed: 42
  loader:
    batch_size: 4
    shuffle: true
    num_workers: 4
  preprocessing:
    - tokenize:
        tokenizer: "hf://meta-llama/Llama-2-7b"
        max_length: 2048
        padding: "max_length"
        truncation: true

model:
  source: "hf://meta-llama/Llama-2-7b"
  device: "auto"
  dtype: "float16"

optimizer:
  name: "adamw"
  lr: 2e-4
  betas: [0.9, 0.999]
  weight_decay: 0.01

scheduler:
  name: "cosine_annealing"
  warmup:
    steps: 100
  T_max: 10000
  eta_min: 1e-6

training:
  epochs: 3
  gradient:
    accumulation_steps: 16
    clip_norm: 1.0
  mixed_precision:
    enabled: true
    dtype: "bfloat16"
  checkpoint:
    save_every: 500
    keep_last: 3
    save_best: true
    metric: "val_loss"
  early_stopping:
    enabled: true
    patience: 5
    metric: "val_loss"

lora:
  enabled: true
  rank: 64
  alpha: 128
  dropout: 0.05
  target_modules:
    - q_proj
    - k_proj
    - v_proj
    - o_proj
  quantize_base: true
  quantize_bits: 4
  quant_type: "nf4"

monitoring:
  terminal:
    enabled: true
    refresh_rate: 100
  tracking:
    enabled: true
    backend: "trueno-db"
    project: "llama-finetune"
  system:
    enabled: true

output:
  dir: "./experiments/llama2-alpaca/{{ timestamp }}"
  model:
    format: "safetensors"
  report:
    enabled: true
    format: "markdown"
"""),
    Snippet("yaml", "§12", "cmd", r"""
entrenar train config.yaml
"""),
    Snippet("yaml", "§12", "cmd", r"""
entrenar train config.yaml --set training.epochs=5 --set optimizer.lr=0.0001
"""),
    Snippet("yaml", "§12", "cmd", r"""
entrenar validate config.yaml
"""),
    Snippet("yaml", "§12", "cmd", r"""
entrenar init --template lora > my-config.yaml
"""),
    Snippet("yaml", "§12", "cmd", r"""
entrenar train config.yaml --resume ./checkpoints/step-5000
"""),
    Snippet("yaml", "§12", "cmd", r"""
entrenar train config.yaml --devices 0,1,2,3
"""),
    Snippet("yaml", "§12", "cmd", r"""
entrenar train config.yaml --dry-run
"""),
    Snippet("yaml", "§13", "yaml", r"""
output:
  dir: "./experiments/{{ name }}/{{ timestamp }}"
"""),
    Snippet("yaml", "§13", "yaml", r"""
data:
  source: "{{ env.DATA_PATH }}"
"""),
    Snippet("yaml", "§13", "yaml", r"""
training:
  effective_batch_size: "{{ data.loader.batch_size * training.gradient.accumulation_steps }}"
"""),
    Snippet("yaml", "§13", "yaml", r"""
optimizer:
  lr: "{{ 1e-4 if lora.enabled else 1e-5 }}"
"""),
    Snippet("yaml", "§14", "cmd", r"""
entrenar validate config.yaml
"""),
    Snippet("yaml", "§15.1", "yaml", r"""
seed: 42                                  # Global seed for all RNGs

data:
  split:
    seed: 42                              # Data split seed
  loader:
    shuffle: true
    seed: 42                              # Shuffle seed (per epoch: seed + epoch)

training:
  deterministic: true                     # Enable deterministic algorithms
  benchmark: false                        # Disable cuDNN autotuner
"""),
    Snippet("yaml", "§15.2", "cmd", r"""
entrenar lock config.yaml > config.lock.yaml
"""),
    Snippet("yaml", "§15.2", "cmd", r"""
entrenar train config.lock.yaml --strict
"""),
    Snippet("yaml", "§16.1", "yaml", r"""
quality:
  score: 87.5                             # 0-100
  grade: "B+"                             # F to A+

  breakdown:
    convergence: 92.0                     # Loss reduction smoothness
    stability: 85.0                       # Gradient stability
    efficiency: 88.0                      # Samples/second
    generalization: 82.0                  # Train/val gap
    reproducibility: 95.0                 # Cross-run variance
"""),
    Snippet("yaml", "Appendix A", "yaml", r"""
entrenar: "1.0"
seed: null                                # Random if not specified

data:
  format: "auto"
  split:
    train: 0.8
    val: 0.1
    test: 0.1
  loader:
    batch_size: 32
    shuffle: true
    num_workers: 0
    pin_memory: false
    drop_last: false

model:
  device: "auto"
  dtype: "float32"

optimizer:
  name: "adamw"
  lr: 0.001
  weight_decay: 0.01
  betas: [0.9, 0.999]
  eps: 1e-8

scheduler:
  name: "cosine_annealing"
  warmup:
    steps: 0

training:
  epochs: 10
  gradient:
    accumulation_steps: 1
    clip_norm: null
  mixed_precision:
    enabled: false
  checkpoint:
    save_every: 1000
    keep_last: 3
    save_best: true
    metric: "val_loss"
    mode: "min"
  early_stopping:
    enabled: false

lora:
  enabled: false
  rank: 16
  alpha: 32
  dropout: 0.05

quantize:
  enabled: false
  bits: 8
  scheme: "symmetric"

monitoring:
  terminal:
    enabled: true
  tracking:
    enabled: false
  system:
    enabled: false

output:
  dir: "./output"
  model:
    format: "safetensors"
"""),
    Snippet("yaml", "Appendix B", "yaml", r"""
entrenar: "1.0"
name: "llama-lora"
version: "1.0.0"

model:
  source: "hf://meta-llama/Llama-2-7b"

lora:
  enabled: true
  rank: 16
  alpha: 32
  target_modules: [q_proj, v_proj]

training:
  epochs: 3

output:
  dir: "./output"
"""),

]


def snippet(spec: str, section: str) -> str:
    """The text of `spec`'s first snippet in `section`: other tests run the spec's examples from here too."""
    return next(s.text for s in SNIPPETS if (s.spec, s.section) == (spec, section))


def write_chat(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, records in (("train.jsonl", CHAT[:16]), ("val.jsonl", CHAT[16:])):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")


def call(argv: list[str], stdout: list[str] | None = None) -> tuple[int, str]:
    """cli.main in this process; (exit code, its stderr and stdout); `stdout`, when given, also gets the stdout
    alone (what a shell's `> FILE` receives). Only an exception other than SystemExit escapes (a traceback: the
    test fails)."""
    import io

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
    if stdout is not None:
        stdout.append(out.getvalue())
    return code or 0, err.getvalue() + out.getvalue()


def workspace(root: Path) -> Path:
    """The commands' workspace, built once; each command runs in a fresh copy."""
    base = root / "workspace"
    hf_folder(base / "base")
    write_chat(base / "data")
    write_chat(base / "my-data")
    run = make_run(root / "tiny")
    shutil.copytree(run, base / "output")
    here = os.getcwd()
    os.chdir(base)
    try:
        for argv in (["init", "--base", TINY_BASE, "--method", "qlora", "--data", "./data/"],
                     ["lock", "config.yaml", "-o", "config.lock.yaml"]):
            code, text = call(argv)
            assert code == 0, text
    finally:
        os.chdir(here)
    return base


def problems(text: str, where: Path) -> list[str]:
    """The error: line, or the problems listed under an `error: FILE has N problems:` header."""
    lines = [line.strip() for line in text.replace(str(where) + "/", "").splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if "error:" in line] or [0]
    first = errors[0]
    if lines and lines[first].endswith(("problem:", "problems:")):
        return [line.replace("|", "\\|") for line in lines[first + 1:] if not line.startswith(("hint", "see "))]
    return [line.replace("|", "\\|") for line in lines[first:first + 1]] or ["(no message)"]


def verdict(code: int, text: str, where: Path) -> str:
    if "Traceback (most recent call last)" in text:
        return "traceback: " + text.strip().splitlines()[-1]
    if code == 0:
        return "works"
    found = problems(text, where)
    missing = any(word in line and "...: unknown key" not in line  # `{ ... }`: the spec's placeholder
                  for line in found for word in ("unknown key", "invalid choice", "unrecognized argu"))
    return ("missing: " if missing else "refused: ") + "<br>".join(f"`` {line} ``" for line in found)


# --- effects: what a working snippet did, checked against what its spec says it means ------------------------------
# A snippet that exits 0 is not yet a snippet that works: each one's effect is checked here against the spec's own
# words (the claim quotes them), from the files and output the run left. A claim that fails is "silently
# different", and the test fails.


@dataclass(frozen=True)
class Ran:
    where: Path  # the folder it ran in
    output: str  # stderr and stdout
    argv: tuple[str, ...]  # a command's minitrain arguments; () for a YAML block


Claim = tuple[str, bool | str]  # (what the spec says it means, whether the run did that: True, False or SAID)
SAID = "said"  # the run differs from the spec and says so on screen (the claim names where)


@contextlib.contextmanager
def inside(folder: Path):
    """Run in `folder`: the workspace's configs name their files relative to it."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def loaded(where: Path, name: str = "config.yaml", overrides: tuple[str, ...] = ()):
    """The config `train` and `validate` load, read in `where`."""
    from minitrain.config import load_config

    with inside(where):
        return load_config(name, overrides=overrides)


def dry_plan(output: str) -> dict:
    """The plan `train --dry-run` prints under its `dry run (nothing written):` line: its top-level `key: value`s."""
    import yaml

    plan = output.split("dry run (nothing written):\n", 1)[1]
    return {key: yaml.safe_load(value) if value else None for key, value in re.findall(r"^  (\w+):(.*)$", plan, re.M)}


def init_effect(ran: Ran) -> list[Claim]:
    """§3.4: `init --base B --method qlora --data D` writes config.yaml from the base's config.json, a 4-bit base
    with LoRA adapters, the data of D, a publish: placeholder; it validates (`train config.yaml` is §1's next step)."""
    base = json.loads((ran.where / "base" / "config.json").read_text("utf-8"))
    text = (ran.where / "config.yaml").read_text("utf-8")
    cfg = loaded(ran.where)
    folder = ran.argv[ran.argv.index("--data") + 1].strip("./")
    return [("writes config.yaml (no other config file)", not (ran.where / "minitrain.yaml").exists()),
            ("the architecture from the base's config.json", (cfg.model.d_model, cfg.model.n_layer,
             cfg.model.vocab_size) == (base["hidden_size"], base["num_hidden_layers"], base["vocab_size"])),
            ("QLoRA: LoRA adapters on a frozen 4-bit NF4 base", cfg.lora.enabled and cfg.lora.quantize_base
             and cfg.lora.quantize_bits == 4 and cfg.lora.quant_type == "nf4"),
            (f"the data of --data ({folder}/train.jsonl)", cfg.data.train_path == f"{folder}/train.jsonl"),
            ("a publish: section placeholder", "# publish:" in text and "#   repo:" in text),
            ("§4.1's `Output: ./output/` is runs/<name>/ here, as init's Output: line says", "Output: ./output/"
             in ran.output or (SAID if re.search(r"^  Output: runs/[\w.-]+/$", ran.output, re.M) else False))]


def dry_run_effect(ran: Ran, overrides: tuple[str, ...] = ()) -> list[Claim]:
    """§12: `--dry-run` shows the execution plan and trains nothing; the plan is the config's run."""
    plan, cfg = dry_plan(ran.output), loaded(ran.where, ran.argv[1], overrides)
    steps, epochs = cfg.training.total_steps, cfg.training.epochs
    length = f"{steps} steps" if steps else f"{epochs} epochs"
    return [("shows the plan, writes nothing", not (ran.where / "runs").exists()
             and not (ran.where / str(cfg.output.dir)).exists()),
            (f"the config's run: {length} into {cfg.output.dir}", plan["output_dir"] == str(cfg.output.dir)
             and (plan["steps"] == steps if steps else plan["epochs"] == epochs)),
            ("QLoRA: only the adapters train, the base in 4 bits", plan["trainable_parameters"] < plan["parameters"]
             and "base_4bit" in plan)]


def publishes_effect(ran: Ran, repo: str) -> list[Claim]:
    """§1 / §4.2: with a publish: section, `train config.yaml` trains and then publishes (its premise: init's
    placeholder uncommented)."""
    text = (ran.where / "config.yaml").read_text("utf-8").replace("# publish:", "publish:").replace(
        "#   repo: user/name", f"  repo: {repo}")
    (ran.where / "published.yaml").write_text(text, "utf-8")
    with inside(ran.where):
        code, output = call(["train", "published.yaml", "--dry-run", "--out-dir", "p"])
    return [(f"with the publish: section, the plan ends in publishing to {repo}",
             code == 0 and dry_plan(output).get("publish_to") == repo)]


def trained_effect(ran: Ran) -> list[Claim]:
    """§1: `train config.yaml` trains and saves the model (run for real here, besides the dry run), leaving §15.3's
    artifacts."""
    out = ran.where / "trained"
    with inside(ran.where):
        code, _ = call(["train", "config.yaml", "--out-dir", "trained", "--quiet"])
    results = json.loads((out / "results.json").read_text("utf-8")) if code == 0 else {}
    steps = [r["step"] for r in read_log(out) if "loss" in r] if code == 0 else []
    artifacts = ("config.yaml", "config.resolved.yaml", "environment.yaml", "metrics.parquet", "checkpoints", "logs")
    return [("a real run trains every step and saves the model", code == 0 and steps == list(range(
        loaded(ran.where).training.total_steps)) and bool(results.get("model_path"))),
            ("§15.3's artifacts: " + ", ".join(artifacts), code == 0 and all((out / a).exists() for a in artifacts))]


def publish_effect(ran: Ran) -> list[Claim]:
    """§3.1: publish (default ./output) uploads model.safetensors + README.md (the card) + config.json."""
    listed = set(re.findall(r"^  (\S+)  \(", ran.output, re.M))
    claims = [("lists model.safetensors, README.md (model card), config.json; sends nothing (--dry-run)",
               {"model.safetensors", "README.md", "config.json"} <= listed and "Dry run" in ran.output)]
    if len(ran.argv) == 4:  # no folder given: the spec's default
        claims.append(("the default folder is ./output", "Publishing ./output (the default folder)" in ran.output))
    else:  # §4.1's ./output/ after its init and train: this workspace's is a run of its own
        shutil.rmtree(ran.where / "output")
        with inside(ran.where):
            code, output = call(list(ran.argv))
        claims.append(("./output/ is the workspace's finished run: after §4.1's init and train the run is in "
                       "runs/<name>/, and `publish ./output/` then says so: runs go to runs/<name>",
                       SAID if code != 0 and "no such folder: a run goes to runs/<name>" in output else False))
    return claims


def publish_args_effect() -> list[Claim]:
    """§3.1 PublishArgs: --private off, --model-card on, --merge-adapters off, --format safetensors by default."""
    args = cli.build_parser().parse_args(["publish", "--repo", "a/b"])
    return [("defaults: not private, a model card, adapters not merged, safetensors",
             (args.private, args.model_card, args.merge_adapters, args.format) in
             ((False, True, False, "safetensors"), (False, True, False, "hf")))]


def validate_effect(ran: Ran) -> list[Claim]:
    """§14: validate checks required fields, types, ranges and cross-field rules, says the config is valid, runs
    nothing."""
    return [("types, ranges and cross-field rules checked; 'valid'; nothing run",
             all(part in ran.output for part in ("types and ranges valid", "cross-field rules pass", "is valid."))
             and not (ran.where / "runs").exists())]


def lock_effect(ran: Ran) -> list[Claim]:
    """§15.2: `lock config.yaml > config.lock.yaml` leaves a lockfile with resolved versions and hashes."""
    import hashlib

    import yaml

    lock = yaml.safe_load((ran.where / "config.lock.yaml").read_text("utf-8")) or {}
    data = lock.get("data") or {}
    return [("config.lock.yaml: the resolved config, library versions, each data file's sha256",
             bool(lock.get("config")) and bool(lock.get("versions")) and len(data) == 2
             and all(hashlib.sha256((ran.where / path).read_bytes()).hexdigest() == digest
                     for path, digest in data.items()))]


def yaml_effect(snippet: Snippet, ran: Ran) -> list[Claim]:
    """A YAML block's meaning, from the config `validate` loaded."""
    from minitrain.config import resolved_dict

    cfg = resolved_dict(loaded(ran.where))
    first = next(line for line in snippet.text.splitlines() if line.strip() and not line.startswith("#"))
    if snippet.section == "§3.2":
        import yaml

        written = yaml.safe_load(snippet.text)["model"]["architecture"]["layers"]
        for layer in written:
            layer.get("linear", {}).setdefault("bias", True)
        return [("the layers as written (784→256→128→10, ReLU, dropout 0.2, softmax)",
                 cfg["model"]["type"] == "sequential" and cfg["model"]["layers"] == written)]
    if first == "output:":
        return [("output.dir is ./experiments/{name}/{ISO 8601 timestamp}",
                 re.fullmatch(r"\./experiments/spec-example/\d{8}T\d{6}Z", cfg["output"]["dir"]) is not None)]
    if first == "training:":
        bigger = snippet.text.replace('"{{ data', "33 # {{ data")
        (ran.where / "bigger.yaml").write_text(bigger + MANIFEST_ROOT, "utf-8")
        code, output = call(["validate", "--no-data", str(ran.where / "bigger.yaml")])
        return [("effective_batch_size = batch_size × accumulation_steps = 32 (Appendix A); 33 is refused",
                 cfg["training"]["batch_size"] * cfg["training"]["grad_accumulation"] == 32 and code != 0
                 and "effective_batch_size" in output)]
    if first == "optimizer:":
        return [("lr 1e-5 (lora.enabled is false, Appendix A)", cfg["optimizer"]["lr_max"] == 1e-5)]
    raise AssertionError(f"no effect check for {snippet.section}: {first}")


def effect_of(snippet: Snippet, ran: Ran) -> list[Claim]:
    """The claims a working snippet is checked on (an AssertionError for one without: every working row has some)."""
    if snippet.kind == "yaml":
        return yaml_effect(snippet, ran)
    if snippet.kind == "flags":
        return publish_args_effect()
    command, rest = ran.argv[0], ran.argv[1:]
    if command == "init":
        return init_effect(ran)
    if command == "publish":
        return publish_effect(ran)
    if command in ("validate",):
        return validate_effect(ran)
    if command == "lock":
        return lock_effect(ran)
    overrides = tuple(rest[i + 1] for i, a in enumerate(rest) if a == "--set")
    claims = dry_run_effect(ran, overrides)
    if overrides:
        cfg = loaded(ran.where, rest[0], overrides)
        plan = dry_plan(ran.output)
        claims.append(("--set training.epochs=5 --set optimizer.lr=0.0001: 5 epochs at lr 1e-4",
                       cfg.training.epochs == 5 and plan["epochs"] == 5.0 and cfg.optimizer.lr_max == 1e-4))
    elif "trains AND publishes" in snippet.text or snippet.section == "§4.2":
        claims += publishes_effect(ran, "myuser/qwen-rust-coder" if snippet.section == "§4.2" else
                                   "myuser/my-finetuned-model")
    elif (snippet.spec, snippet.section) == ("publish", "§1"):
        claims += trained_effect(ran)
    elif (snippet.spec, snippet.section) == ("publish", "§4.1"):
        out = dry_plan(ran.output)["output_dir"]
        claims.append((f"§4.1's `Saved: ./output/model.safetensors` is {out}/ here, as the plan's output_dir says",
                       out in ("output", "./output") or SAID))  # the plan prints it
    return claims


def effect_text(claims: list[Claim]) -> str:
    wrong, said = ([claim for claim, ok in claims if ok is kind] for kind in (False, SAID))
    if wrong:
        return "silently different: " + "; ".join(wrong)
    held = "as the spec says: " + "; ".join(claim for claim, ok in claims if ok is True)
    return f"differs, and says so: {'; '.join(said)}; otherwise {held}" if said else held


def read_log(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text("utf-8").splitlines() if line.strip()]


def semantics(root: Path, base: Path) -> list[Claim]:
    """The issue's semantics, run once for real: the workspace's config with the spec's spellings of validation
    each epoch and a warm-up from start_lr, trained two epochs (2 steps each); and §3.3's keys, resolved."""
    import yaml

    from minitrain.config import load_config, resolved_dict

    shutil.copytree(base, root)
    config = yaml.safe_load((root / "config.yaml").read_text("utf-8"))
    for key in ("total_steps", "val_every"):
        del config["training"][key]
    config["training"].update(epochs=2, validation={"every_epoch": True}, log_every=1)
    config["scheduler"] = {"warmup": {"steps": 2, "start_lr": 1e-7}}
    config["output"] = {"plots": False}  # the figures are the other run's (trained_effect): seconds saved
    (root / "spec.yaml").write_text(yaml.safe_dump(config), "utf-8")
    with inside(root):
        code, output = call(["train", "spec.yaml", "--out-dir", "run", "--quiet"])
    assert code == 0, output
    log, resolved = read_log(root / "run"), yaml.safe_load((root / "run" / "config.resolved.yaml").read_text("utf-8"))
    aliases = snippet("publish", "§3.3").replace(HUB_ID, TINY_BASE)
    (root / "s33.yaml").write_text(aliases, "utf-8")  # as written, a fine-tune without held-out records: refused
    with inside(root):
        code, output = call(["validate", "s33.yaml"])
        refused = code == 2 and "give its held-out records as data.val_path" in output
        held_out = aliases.replace("  batch_size: 8", "  batch_size: 8\n  val_path: data/val.jsonl")
        (root / "s33.yaml").write_text(held_out, "utf-8")
        cfg = resolved_dict(load_config("s33.yaml"))
    trained = [r for r in log if "loss" in r]
    peak = resolved["optimizer"]["lr_max"]
    return [("training.validation.every_epoch validates at each epoch's end (steps 1 and 3 of 4)",
             [r["step"] for r in log if "val_loss" in r] == [1, 3]),
            ("scheduler.warmup.start_lr: step 0 trains at 1e-7, step 1 halfway to lr_max (torch's LinearLR)",
             trained[0]["lr"] == pytest.approx(1e-7) and trained[1]["lr"] == pytest.approx(1e-7 + (peak - 1e-7) / 2)),
            ("metrics.parquet written by default (§15.3)", (root / "run" / "metrics.parquet").is_file()),
            ("config.resolved.yaml records the spec's keys resolved (val_every_epoch, warmup_start_lr)",
             resolved["training"].get("val_every_epoch") is True
             and resolved["scheduler"].get("warmup_start_lr") == 1e-7 and "validation" not in resolved["training"]),
            ("publish spec §3.3 with ./base for its Hub id: without data.val_path, refused (the default is the "
             "course's corpus); with it, model.path is init_from ./base read as a llama with its LoRA targets, "
             "data.batch_size training.batch_size 8, training.output_dir output.dir ./output, lr 2e-4, rank 64, "
             "alpha 16, 3 epochs, the publish: section as written",
             refused and cfg["model"]["init_from"] == TINY_BASE and cfg["model"]["type"] == "llama"
             and cfg["lora"]["target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                   "down_proj"]
             and (cfg["training"]["batch_size"], cfg["output"]["dir"], cfg["optimizer"]["lr_max"]) == (8, "./output",
                                                                                                   2e-4)
             and (cfg["lora"]["rank"], cfg["lora"]["alpha"], cfg["training"]["epochs"]) == (64, 16, 3)
             and cfg["publish"] == {"repo": "myuser/qwen-finetuned", "private": False, "model_card": True,
                                    "merge_adapters": True})]


def run_yaml(snippet: Snippet, root: Path) -> tuple[str, str, Ran]:
    path, text, how = root / "config.yaml", snippet.text, "validate --no-data"
    if snippet.spec == "yaml" and not any(line.startswith("entrenar:") for line in text.splitlines()):
        text, how = text + MANIFEST_ROOT, how + " (in a manifest: §1.1's required root keys appended)"
    path.write_text(text, "utf-8")
    code, output = call(["validate", "--no-data", str(path)])
    return how, verdict(code, output, root), Ran(root, output, ())


def run_cmd(snippet: Snippet, root: Path, base: Path) -> tuple[str, str, Ran]:
    line, swaps = snippet.text.strip(), []
    if "#" in line:
        line, swaps = line.split("#")[0].strip(), ["comment dropped"]
    if HUB_ID in line:
        line, swaps = line.replace(HUB_ID, TINY_BASE), [*swaps, f"{HUB_ID} → {TINY_BASE}"]
    redirect = None
    if " > " in line:
        line, redirect = (part.strip() for part in line.split(" > "))
    argv = shlex.split(line)[1:]
    if argv[0] in ("train", "publish") and "--dry-run" not in argv:
        argv, swaps = [*argv, "--dry-run"], [*swaps, "--dry-run added"]
    if argv[0] == "init":
        (root / "config.yaml").unlink()
    here, stdout = os.getcwd(), []
    os.chdir(root)
    try:
        if redirect:  # the shell opens (truncates) the file before the command runs, and it gets the stdout
            (root / redirect).write_text("", "utf-8")
        code, text = call(argv, stdout)
    finally:
        os.chdir(here)
    if redirect and stdout[0]:
        (root / redirect).write_text(stdout[0], "utf-8")
    how = "``minitrain " + " ".join(shlex.quote(a) for a in argv) + "``" + (f" > {redirect}" if redirect else "")
    return how + (f" ({'; '.join(swaps)})" if swaps else ""), verdict(code, text, root), Ran(root, text, tuple(argv))


def run_flags(snippet: Snippet, root: Path) -> tuple[str, str, Ran]:
    """A clap struct of the spec (PublishArgs): each `#[arg(long)]` field must be a flag of `minitrain publish`, and
    the positional one (its default ./output) the positional argument with that default, which `--help` says."""
    code, text = call(["publish", "--help"])
    assert code == 0, text
    fields = re.findall(r"#\[arg\(([^)]*)\)\]\s*pub (\w+):", snippet.text)
    absent = [f"--{name.replace('_', '-')}" for args, name in fields
              if "long" in args and f"--{name.replace('_', '-')}" not in text]
    absent += [f"{name} (default ./output)" for args, name in fields if "long" not in args and "./output" not in text]
    how = "each field a flag in ``minitrain publish --help``"
    return how, (f"missing: `` {', '.join(absent)} ``" if absent else "works"), Ran(root, text, ("publish",))


@cache
def table(root: Path) -> tuple[tuple[tuple[str, str, str], ...], tuple[Claim, ...]]:
    """((how each snippet ran, its verdict, its effect), in SNIPPETS' order; the issue's semantics, run). An
    exception is the verdict `traceback: ...`; a working snippet's effect is `effect_of`'s claims, rendered."""
    root.mkdir()
    base = workspace(root)
    rows = []
    for i, snippet in enumerate(SNIPPETS):
        where = root / f"s{i:02d}"
        try:
            if snippet.kind == "yaml":
                where.mkdir()
                how, result, ran = run_yaml(snippet, where)
            elif snippet.kind == "flags":
                how, result, ran = run_flags(snippet, where)
            else:
                shutil.copytree(base, where)
                how, result, ran = run_cmd(snippet, where, base)
            rows.append((how, result, effect_text(effect_of(snippet, ran)) if result == "works" else ""))
        except Exception:  # the verdict names it, and the test fails
            rows.append(("", "traceback: " + traceback.format_exc().strip().splitlines()[-1], ""))
    return tuple(rows), tuple(semantics(root / "semantics", base))


@pytest.fixture
def verdicts(tmp_path_factory, offline_hub) -> tuple[tuple[tuple[str, str, str], ...], tuple[Claim, ...]]:
    """The table, computed once, by the first test that asks, with the Hub offline (conftest's offline_hub)."""
    return table(tmp_path_factory.getbasetemp() / "spec-coverage")


def render(rows: tuple[tuple[str, str, str], ...], checked: tuple[Claim, ...]) -> str:
    counts = {kind: sum(v.startswith(kind) for _, v, _ in rows) for kind in ("works", "refused", "missing")}
    different, said = (sum(effect.startswith(kind) for _, _, effect in rows) for kind in ("silently", "differs"))
    out = ["# The specs' examples in minitrain", "",
           "Generated by `tests/test_spec_coverage.py` (`MINITRAIN_WRITE_SPEC_COVERAGE=1 pytest "
           "tests/test_spec_coverage.py`); the test fails when this file differs from what it computes. Every YAML "
           "block and command line of the two specs (docs/yaml-mode.md names them), run as the test's docstring "
           "says: a YAML block by `minitrain validate --no-data`, a command as written in a small workspace. "
           "*works*: exit 0; *refused*: the one error line it gave; *missing*: an unknown key, command or flag. "
           "The publish spec's Rust is the other tool's own code: §2.4's `use` lines and §3.1's `Publish(PublishArgs)` "
           "are not run; §3.1's PublishArgs is checked flag by flag against `minitrain publish --help`. A snippet "
           "that works has its effect checked against what its spec says it means (the last column: each claim an "
           "assertion on the files and output it left, `effect_of` in the test); one whose effect differs from it "
           "*differs, and says so* when its output says what it does instead, else it is *silently different*.", "",
           f"{len(rows)} snippets: {counts['works']} work ({counts['works'] - different - said} as the spec says, "
           f"{said} differ and say so, {different} silently different), {counts['refused']} refused, "
           f"{counts['missing']} missing.",
           "", "| Spec | § | Snippet (first line) | Run as | Verdict | Effect checked |", "|---|---|---|---|---|---|"]
    for snippet, (how, result, effect) in zip(SNIPPETS, rows, strict=True):
        first = next(line for line in snippet.text.splitlines() if line.strip()).strip().replace("|", "\\|")
        out.append(f"| {SPECS[snippet.spec]} | {snippet.section} | `` {first} `` | {how} | {result} | "
                   f"{effect} |")
    out += ["", "The issue's semantics (yaml-mode-spec.txt §5.2, §4.2, §15.3), one real two-epoch run of the "
                "workspace's config.yaml with the spec's spellings (`semantics` in the test):", ""]
    out += [f"- {'as the spec says' if ok else 'silently different'}: {claim}" for claim, ok in checked]
    return "\n".join(out) + "\n"


IDS = [f"{i:02d}-{s.spec}-{s.section.replace('§', 's').replace(' ', '-')}" for i, s in enumerate(SNIPPETS)]


@pytest.mark.parametrize("index", range(len(SNIPPETS)), ids=IDS)
def test_each_spec_example_works_or_says_why_not(verdicts, index):
    _, result, effect = verdicts[0][index]
    assert result.startswith(("works", "refused: `", "missing: `")), result
    assert "Traceback" not in result
    assert effect.startswith(("as the spec says", "differs, and says so")) or result != "works", effect


def test_the_issues_semantics_hold_in_a_real_run(verdicts):
    assert all(ok for _, ok in verdicts[1]), [claim for claim, ok in verdicts[1] if not ok]


def test_the_coverage_doc_is_the_table_the_test_computes(verdicts):
    text = render(*verdicts)
    if os.environ.get("MINITRAIN_WRITE_SPEC_COVERAGE") == "1":
        DOC.write_text(text, "utf-8")
    assert DOC.read_text("utf-8") == text, "docs/spec-coverage.md is stale: MINITRAIN_WRITE_SPEC_COVERAGE=1"


def test_the_snippets_are_the_specs_own_text():
    """Where the specs sit beside the clone (../shared/reference), each snippet is found in its spec verbatim."""
    folder = next((up / "shared" / "reference" for up in ROOT.parents if (up / "shared" / "reference").is_dir()), None)
    if folder is None:
        pytest.skip("the specs are not beside this clone")
    texts = {key: (folder / name).read_text("utf-8") for key, name in SPECS.items()}
    for snippet in SNIPPETS:
        assert snippet.text.strip() in texts[snippet.spec], (snippet.spec, snippet.section)
