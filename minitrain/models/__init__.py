"""The model families (one registry, `minitrain.models.registry`): MiniGPT (GPT-2 names), the MLP language model,
the sequential table model; sampling from a language model and reading its attention."""
