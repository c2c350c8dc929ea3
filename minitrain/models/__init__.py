"""The model families (one registry, `minitrain.models.registry`): MiniGPT (GPT-2 names), the MLP language model, the
sequential table model, Llama (the composed decoder); their common forward (language_model.py); sampling from a
language model and reading its attention."""
