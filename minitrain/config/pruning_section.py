"""The `pruning:` section: gradual magnitude pruning of the linear weights during training (Zhu & Gupta's cubic
schedule, minitrain/pruning/gradual.py), and its rules, collected in `RULES` like the other sections'.

    pruning: {sparsity: 0.5, start_step: 100, end_step: 1500, every: 50}    rise to 50 % over steps 100..1500
    pruning: {sparsity: 0.5}                                                one shot, before the first update

A section given is on unless it says `enabled: false`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from minitrain.common.errors import UserError
from minitrain.common.strict import Count, PositiveInt, Ratio, Section
from minitrain.config.problems import Problem
from minitrain.config.rule import RuleBook, unknown_layers
from minitrain.models.registry import linear_module_paths
from minitrain.nn import Module
from minitrain.pruning.gradual import GradualPruner
from minitrain.pruning.masks import prunable_paths


class PruningConfig(Section):
    """Prune the linear layers' weights (not embeddings, norms, biases or an untied lm_head) while training."""

    enabled: bool = False
    method: Literal["magnitude"] = Field("magnitude", description="each layer's lowest |W| (the others: `minitrain "
                                                                  "prune`)")
    sparsity: Ratio = Field(0.5, description="s_f: the share of each layer's weights pruned from end_step on")
    initial_sparsity: Ratio = Field(0.0, description="s_i: the share pruned at start_step")
    start_step: Count = Field(0, description="t₀: updates done when the first pruning happens (0: before any)")
    end_step: Count | None = Field(None, description="t_end: the schedule reaches sparsity here (default t₀)")
    every: PositiveInt = Field(10, description="Δt: steps between two prunings")
    exclude: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="linear layers left dense (names as lora.target_modules)")

    def pruner(self, model: Module, total_steps: int) -> GradualPruner | None:
        """The run's pruner (None when the section is off), before anything is written: a schedule that would end
        after the run (of `total_steps`, resolved from epochs or a duration too) is refused here."""
        if not self.enabled:
            return None
        end = self.start_step if self.end_step is None else self.end_step
        if end > total_steps:
            raise UserError(f"pruning.end_step {end} is after the run's end (total steps {total_steps}): the "
                            "schedule would never reach its sparsity", 2)
        return GradualPruner(prunable_paths(model, self.exclude)[0], self.sparsity, self.initial_sparsity,
                             self.start_step, end, self.every)


RULES = RuleBook()


@RULES.rule("pruning", "model", "lora", "scheduler", "training")
def _pruning_fits(sections, raw):
    """pruning needs initial_sparsity ≤ sparsity, start_step ≤ end_step ≤ total steps, known exclude names, no LoRA."""
    pruning = sections["pruning"]
    if not pruning.enabled:
        return
    total = sections["training"].total_steps or sections["scheduler"].total_steps  # None: epochs or a duration
    end = pruning.start_step if pruning.end_step is None else pruning.end_step
    if total is not None and end > total:
        key = "start_step" if pruning.end_step is None else "end_step"
        yield Problem(("pruning", key), f"{end} is after the run's end (total_steps {total}): the schedule would "
                                        "never reach its sparsity")
    if pruning.initial_sparsity > pruning.sparsity:
        yield Problem(("pruning", "initial_sparsity"), f"{pruning.initial_sparsity} is above sparsity "
                                                       f"{pruning.sparsity}: the schedule only ever prunes more")
    if pruning.end_step is not None and pruning.end_step < pruning.start_step:
        yield Problem(("pruning", "end_step"), f"{pruning.end_step} is before start_step {pruning.start_step}")
    yield from unknown_layers(("pruning", "exclude"), pruning.exclude,
                              linear_module_paths(sections["model"].architecture()))
    if sections["lora"].enabled:
        yield Problem(("pruning", "enabled"), "a LoRA run trains adapters over a frozen base: prune the merged model "
                                              "(`minitrain merge-adapters`, then `minitrain prune`)")
