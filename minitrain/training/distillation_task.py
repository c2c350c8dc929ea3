"""Distillation as a training task: lab 01's next-token prediction with the teacher's soft targets in the loss.

The engine asks a task for `prepare`, `count`, `loss` and `size` (minitrain/training/tasks.py); this one is the
language model's in all but `loss`, which is `minitrain.distillation.loss`'s

    alpha · CE(data) + (1 − alpha) · T² · KL(p_teacher ‖ p_student)

over the positions the loss mask counts (`data.loss_on`). So micro-batches, clipping, the logs and the
validations are the same as without distillation; the logged train `loss` is this mixed loss, while `val_loss`
and `val_ppl` stay the plain cross-entropy on the validation split, comparable with any other run.
"""

from __future__ import annotations

from typing import Any

from minitrain.autograd import functional as F
from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.config import Config
from minitrain.config.problems import Problem
from minitrain.distillation.loss import distillation_loss, soft_loss
from minitrain.distillation.teacher import KEY as TEACHER_KEY
from minitrain.distillation.teacher import Teachers, load_teacher
from minitrain.lora import state_digest
from minitrain.training.tasks import LanguageModeling


class Distillation(LanguageModeling):
    """Next-token prediction against the data and the teachers at once (module docstring)."""

    name = "language_modeling"  # what it is scored as: validation and results are the language model's

    def __init__(self, teachers: Teachers, alpha: float) -> None:
        self.teachers, self.alpha = teachers, alpha

    def loss(self, model: Any, batch: Any) -> Any:
        if self.alpha == 1.0:  # the soft term has no weight: the teachers need not run
            return model(batch.input, batch.target, batch.attn_pad_mask, batch.loss_mask)[1]
        logits, _ = model(batch.input, attn_pad_mask=batch.attn_pad_mask)  # with targets, a decoder gives no logits
        hard = F.cross_entropy(logits, batch.target, batch.loss_mask)
        soft = soft_loss(logits, self.teachers.targets(batch), batch.loss_mask, self.teachers.temperature)
        return distillation_loss(hard, soft, self.alpha)


def teacher_fingerprint(task: Any) -> dict[str, dict[str, str]]:
    """{key: {"path", "sha256"}} of a distillation task's teachers (nothing for another task), the sha256 a digest
    of the weights (`state_digest`). Checkpoints keep it beside the data files' (minitrain/training/resume.py), so a
    resume refuses a teacher whose weights changed under the same source: the config hash sees only the source."""
    if not isinstance(task, Distillation):
        return {}
    teachers = task.teachers
    several = len(teachers.models) > 1
    return {f"distillation.teachers[{i}]" if several else "distillation.teacher":
            {"path": source, "sha256": state_digest(model.state_dict())}
            for i, (source, model) in enumerate(zip(teachers.sources, teachers.models, strict=True))}


def teacher_problems(cfg: Config) -> list[Problem]:
    """What `distillation_task` would refuse in `cfg`, as config problems (so `minitrain validate` names a
    missing, damaged or mismatched teacher, exit code 2, before `train` loads it)."""
    try:
        distillation_task(cfg)
    except UserError as exc:
        key = ("distillation", "teacher" if cfg.distillation.teacher else "teachers")
        return [Problem(key, str(exc).removeprefix(f"{TEACHER_KEY} "))]
    return []


def distillation_task(cfg: Config) -> Distillation:
    """The task of a config whose `distillation:` section is on: its teachers loaded and checked."""
    if cfg.is_table_task or cfg.on_pretrained_base:
        kind = "a table task" if cfg.is_table_task else "a run on a pretrained base"
        raise UserError(f"distillation: {kind} cannot be distilled yet; distillation trains a language model on "
                        "minitrain's character ids (MiniGPT, mlp_lm, ...)", BAD_INPUT)
    section = cfg.distillation
    student = cfg.model.architecture()
    sources, weights = zip(*section.sources(), strict=True)
    models = [load_teacher(source, student, cfg.data.vocab_path) for source in sources]
    return Distillation(Teachers(models, weights, section.temperature, sources), section.alpha)
