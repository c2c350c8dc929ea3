"""Knowledge distillation: a student trained on the data and on one or more teachers' softened predictions.

    loss.py     the KD loss: T² · KL(p_teacher ‖ p_student) over the counted positions, mixed with the hard loss
    teacher.py  the frozen teachers, run in eval mode without a tape, checked to share the student's vocabulary

The training task the engine runs for a `distillation:` section is minitrain/training/distillation_task.py.
"""

from minitrain.distillation.loss import distillation_loss, soft_loss, soft_targets

__all__ = ["distillation_loss", "soft_loss", "soft_targets"]
