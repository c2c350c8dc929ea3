"""The `distillation:` section: train the model against a teacher's softened predictions as well as the data
(minitrain/distillation/). The rules between its keys are checked here, on the section itself."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from minitrain.common.strict import Section

ModelSource = Annotated[str, Field(min_length=1)]


class TeacherEntry(Section):
    """One teacher of several: a run folder, a model file, an export folder or a Hub id, and its weight."""

    model: ModelSource
    weight: float = Field(1.0, ge=0.0, description="its share of the teachers' mixture, before normalizing")


class DistillationStage(Section):
    """A teacher assistant of progressive distillation (minitrain/training/progressive.py): the config with the
    `set` overrides (`--set`'s `key=value`, e.g. "model.n_layer=2") applied, taught by the stage before it."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
    set: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*=")]] = Field(default_factory=list)


class DistillationConfig(Section):
    """Knowledge distillation (Hinton et al. 2015): the loss is

        alpha · CE(data) + (1 − alpha) · T² · KL(p_teacher ‖ p_student),   p = softmax(logits / T)

    over the positions the hard loss counts. One `teacher`, or `teachers` with weights (normalized to sum 1)
    whose softened distributions are mixed into one target. With `stages`, the teachers teach the first stage,
    each stage the next, and the last one the student (progressive distillation)."""

    enabled: bool = False
    teacher: ModelSource | None = None
    teachers: list[TeacherEntry] = Field(default_factory=list)
    temperature: float = Field(2.0, gt=0, description="T: both distributions are softmax(logits / T)")
    alpha: float = Field(0.5, ge=0.0, le=1.0, description="the hard loss's weight; the soft loss gets 1 − alpha")
    stages: list[DistillationStage] = Field(default_factory=list, description="teacher assistants, in order")

    @model_validator(mode="after")
    def _one_kind_of_teacher(self) -> DistillationConfig:
        if not self.enabled:
            return self
        if (self.teacher is None) == (not self.teachers):
            raise ValueError("give one teacher (teacher: RUN_OR_MODEL) or a list (teachers: [{model, weight}]), "
                             f"not {'both' if self.teacher is not None else 'neither'}")
        if self.teachers and sum(t.weight for t in self.teachers) <= 0:
            raise ValueError("the teachers' weights sum to 0: give at least one a weight above 0")
        names = [stage.name for stage in self.stages]
        if len(set(names)) < len(names):
            raise ValueError(f"stages: two stages share a name ({', '.join(names)}): each trains into its own folder")
        return self

    def sources(self) -> list[tuple[str, float]]:
        """(source, weight) of every teacher, the weights normalized to sum 1."""
        entries = [(self.teacher, 1.0)] if self.teacher is not None else [(t.model, t.weight) for t in self.teachers]
        total = sum(weight for _, weight in entries)
        return [(source, weight / total) for source, weight in entries]
