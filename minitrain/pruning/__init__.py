"""Pruning: setting the least important weights of the linear layers to zero, once after training or gradually
during it.

    masks.py     which weights a score keeps: exact counts per layer, per output or 2:4, ties broken by position
    scores.py    magnitude (|W|) and Wanda (|W|·‖X‖) scores, and one-shot pruning of a model
    gradual.py   gradual magnitude pruning during training (Zhu & Gupta 2017's cubic schedule), its masks kept
                 in checkpoints

Only linear weights are pruned (the attention and MLP projections); embeddings, norms, biases and an untied
lm_head stay dense. A pruned weight is stored as a zero in an ordinary model file: the sparsity is in the values,
not in the format, so every command reads a pruned file like any other (NumPy computes a zero like any number:
pruning here shrinks nothing and speeds nothing up; it measures what the model keeps without those weights).
"""
