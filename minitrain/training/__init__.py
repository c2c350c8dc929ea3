"""The training run: the engine (the loop around `loop.train_step`), the parts a config builds, planning, resume,
stopping, the artifacts a run leaves, scoring, fine-tuning staging and quantization, table runs and
cross-validation. `run.run_training` is the entry point the commands call."""
