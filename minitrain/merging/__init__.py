"""Model merging: several fine-tunes of one base combined into one model, weight by weight, without training.

    spec.py      the merge config (mergekit's YAML shape), checked strictly
    parents.py   the models it names, loaded from any source minitrain reads, and the check that they share
                 architecture and tokenizer
    linear.py    linear averaging and task arithmetic (task vectors τ_i = θ_i − θ_base)
    ties.py      TIES: trim, elect sign, disjoint mean (Yadav et al. 2023)
    dare.py      DARE: drop and rescale, then task arithmetic or TIES (Yu et al. 2023)
    slerp.py     SLERP between two models, per tensor
    methods.py   the registry: one MergeMethod record per merge_method (its function, what it reads)
    merge.py     the whole merge: read, check, merge, write (`minitrain merge-models`)
"""

from minitrain.merging.merge import merge_models, merge_states
from minitrain.merging.methods import MERGE_METHODS, MergeMethod

__all__ = ["MERGE_METHODS", "MergeMethod", "merge_models", "merge_states"]
