"""What a run is made of, built from a validated config: tokenizer or table, encoded splits, batchers, the model
(built, adapted, frozen, packed), optimizer and schedule; and the training config hash checkpoints are tied to.
`minitrain/training/run.py` trains them, `minitrain/training/plan.py` times them for the dry run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from minitrain.config import Config, resolved_dict
from minitrain.config.datacheck import load_split
from minitrain.config.table_check import Fold, load_table
from minitrain.data.augmentation import AugmentedBatcher, augmenter
from minitrain.data.batch import Batch
from minitrain.data.batcher import EvalBatcher, TrainBatcher, encode_split
from minitrain.data.bpe import BPETokenizer
from minitrain.data.language_tokenizer import language_tokenizer
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.data.tokenizer import CharTokenizer
from minitrain.evaluation.text_loss import evaluate_text
from minitrain.models.registry import build_model
from minitrain.nn import Module
from minitrain.optim import build_optimizer
from minitrain.optim.schedule import build_scheduler
from minitrain.runs.model_files import config_hash
from minitrain.training import scoring
from minitrain.training.distillation_task import distillation_task
from minitrain.training.finetune import prepare_model
from minitrain.training.scoring import EVAL_BATCH_SIZE
from minitrain.training.table_results import table_validator
from minitrain.training.tasks import LANGUAGE_MODELING, table_task
from minitrain.training.text_run import TEXT_EVAL_BATCH_SIZE, base_tokenizer, text_splits, train_batcher

# Config sections that do not change what is trained, so a resume may change them: where files go, how
# progress is shown, naming, tracking, the callbacks (they only watch), the threads; and of `training`, the
# checkpoint cadence and gradient checkpointing (it recomputes the same activations: the same gradients, bit for bit).
_NOT_HASHED = ("name", "version", "description", "output", "monitoring", "publish", "callbacks", "runtime")
_NOT_HASHED_TRAINING = ("checkpoint", "gradient_checkpointing")


@dataclass
class Parts:
    """Everything a run is made of, built from a config. A table task (model.type sequential) has no tokenizer
    or records: `table` holds its splits and the pipeline that made them, and `task` scores it."""

    tokenizer: CharTokenizer | BPETokenizer | PretrainedTokenizer | None  # a pretrained base's own, chars or BPE
    train_records: list[dict] | None
    val_records: list[dict] | None
    train_split: Any  # Batch, or a table's TableBatch
    batcher: TrainBatcher  # or an AugmentedBatcher around one
    val_batches: EvalBatcher
    model: Module
    optimizer: Any
    scheduler: Any
    total_steps: int
    task: Any = LANGUAGE_MODELING
    table: Any = None  # minitrain.data.tables.TableData
    init_from: str | None = None  # where a LoRA run's base came from (it is loaded while building)
    text: dict[str, Batch] | None = None  # a run on a pretrained base: its packed splits (train, val, test)


def build_parts(cfg: Config, total_steps: int, fold: Fold | None = None, text: dict[str, Batch] | None = None) -> Parts:
    """Tokenizer, encoded splits, batchers, model, optimizer and schedule; the schedule spans `total_steps`.
    For a table: its splits (fold `fold` of a cross-validation) and the model's widths from the data. For a run on
    a pretrained base: the base's tokenizer and the packed text splits (`cfg` completed by text_run.complete_config;
    `text`: the splits the data check packed, DataSummary.text, else packed here).

    The model is built (drawing its initial weights from the training RNG), adapted as the lora and quantize
    sections say (minitrain/training/finetune.py: a LoRA base is loaded here), frozen where `model.freeze` says, then
    packed into one flat buffer; the optimizer updates only the trainable parameters."""
    tokenizer = train_records = val_records = table = None
    task = LANGUAGE_MODELING
    if cfg.is_table_task:
        table, architecture = load_table(cfg, fold)
        train_split, val_split = table.splits["train"], table.splits["val"]
        task = table_task(table.pipeline.task, cfg.training.loss, cfg.training.huber_delta)
    elif cfg.on_pretrained_base:  # text records with the base's tokenizer (minitrain/training/text_run.py)
        tokenizer = base_tokenizer(cfg)
        text = text if text is not None else text_splits(cfg, tokenizer)
        train_split, val_split = text["train"], text["val"]
        architecture = cfg.model.architecture()
    else:
        tokenizer = language_tokenizer(cfg.data)  # characters, or a BPE trained on the training split
        train_records, val_records = load_split(cfg.data, "train"), load_split(cfg.data, "val")
        seq_len = cfg.model.max_seq_len
        train_split = encode_split(train_records, tokenizer, seq_len, cfg.data.loss_on)
        val_split = encode_split(val_records, tokenizer, seq_len, cfg.data.loss_on)
        architecture = cfg.model.architecture()
    t = cfg.training
    batcher = train_batcher(cfg, train_split)  # the data RNG
    augment = augmenter(cfg.data.augmentation, cfg.data.image_shape)
    if augment is not None:
        batcher = AugmentedBatcher(batcher, augment, t.data_seed)
    train_rng = np.random.Generator(np.random.PCG64(t.rng_seed))  # the training RNG
    model = build_model(architecture, rng=train_rng, dtype=np.dtype(cfg.model.dtype).type)
    if t.gradient_checkpointing:  # a rule allows it only for a family that has it (minitrain/config/rules.py)
        model.gradient_checkpointing = True
    base = prepare_model(model, cfg, train_rng)
    if cfg.model.freeze:
        model.freeze(cfg.model.freeze)
    model.pack_parameters()
    if cfg.distillation.enabled:  # the teachers' soft targets join the loss (minitrain/training/distillation_task.py)
        task = distillation_task(cfg)
    optimizer = build_optimizer(cfg.optimizer.type, model.trainable_parameters(), buffer=model.buffer,
                                **cfg.optimizer.kwargs())
    scheduler = build_scheduler(cfg.scheduler.type, optimizer, **cfg.scheduler_kwargs(total_steps))
    return Parts(tokenizer, train_records, val_records, train_split, batcher,
                 EvalBatcher(val_split, TEXT_EVAL_BATCH_SIZE if text else EVAL_BATCH_SIZE), model, optimizer,
                 scheduler, total_steps, task, table,
                 base, text)


def parameter_counts(model: Module) -> dict[str, int]:
    """{"parameters": all}, plus the trainable and frozen counts when some parameters are frozen."""
    total, trainable = model.num_parameters(), model.num_parameters(trainable_only=True)
    if trainable == total:
        return {"parameters": total}
    return {"parameters": total, "trainable_parameters": trainable, "frozen_parameters": total - trainable}


def training_config_hash(cfg: Config) -> str:
    """Hash of everything that shapes training: all but `_NOT_HASHED` and `_NOT_HASHED_TRAINING`, which a resume
    may change."""
    return config_hash(hashed_part(resolved_dict(cfg)))


def hashed_part(resolved: dict[str, Any]) -> dict[str, Any]:
    """The keys of a resolved config (as config.resolved.yaml holds it) that the training config hash covers."""
    data = {k: v for k, v in resolved.items() if k not in _NOT_HASHED}
    training = data.get("training")
    if isinstance(training, dict):
        data["training"] = {k: v for k, v in training.items() if k not in _NOT_HASHED_TRAINING}
    return data


def validator_for(cfg: Config, parts: Parts) -> Callable[[Any], dict[str, float]] | None:
    """What each validation measures: a table task's own loss and metrics, or for a language model what
    training.val_metrics asks beyond loss and perplexity (None: the loop's own evaluate)."""
    if parts.table is not None:
        return table_validator(cfg, parts.task, parts.val_batches)
    validate = scoring.validator(cfg.training.val_metrics, parts.val_batches, parts.tokenizer, parts.val_records)
    if validate is None and parts.text is not None:  # a pretrained base's vocabulary: never its whole val logits
        return lambda model: dict(zip(("val_loss", "val_ppl"), evaluate_text(model, parts.val_batches), strict=True))
    return validate
