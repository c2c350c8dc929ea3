"""What every section of the config schema shares: strict validation, and the value types several sections use.

schema.py holds the training sections (data_section.py the data section); observing.py the sections that watch a
run without changing it; run_sections.py, finetune_sections.py and table_sections.py the others. All build on `Section`
(minitrain/common/strict.py, where the model families' own keys find it too).
"""

from __future__ import annotations

import inspect
from typing import Any, Literal

from pydantic import BaseModel

# Metrics the loop measures; checkpoint selection, early stopping and the plateau schedule may watch them. The
# classifier's and regressor's are logged when training.val_metrics lists them (rules.py checks that).
Metric = Literal["val_loss", "val_ppl", "loss", "val_accuracy", "val_precision", "val_recall", "val_f1",
                 "val_auc_roc", "val_mse", "val_mae", "val_r2"]
HIGHER_IS_BETTER = ("val_accuracy", "val_precision", "val_recall", "val_f1", "val_auc_roc", "val_r2")

def fill_defaults(section: BaseModel, keys: set[str], defaults: dict[str, Any]) -> None:
    """Give the keys of `keys` left out (None) the chosen type's defaults (inspect.Parameter.empty: none).

    object.__setattr__ keeps model_fields_set as "what the user wrote", which the rules read to spot keys of
    another type."""
    for key in keys:
        if getattr(section, key) is None and defaults.get(key, inspect.Parameter.empty) is not inspect.Parameter.empty:
            object.__setattr__(section, key, defaults[key])
