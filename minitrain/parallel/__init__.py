"""Data parallelism: each step's micro-batches computed by workers, their gradients summed in micro-batch order,
the update applied once by the training process (docs/distributed.md).

    replica.py      what a worker computes: one micro-batch's gradient on a model rebuilt from its config
    reduce.py       what the training process does with them: weights before, the ordered sum and clip after
    shared.py       the local backend's shared-memory block: parameters, batches and gradients, no pickling
    local.py        the local backend: this process as worker 0, worker processes (started once per run)
    ray_workers.py  the Ray backend: the same workers as Ray actors, reduced through Ray's object store
    workers.py      start_workers(settings, model, rows, cols): the backend runtime.data_parallel names
    switch.py       WorkerSwitch: `runtime.threads: measure` puts a setting (threads, workers) in force mid-run

Bytes: micro-batch i's gradient is computed from zero, as `minitrain/loop.py`'s train_step computes it, and the
step's gradient is g_0 + g_1 + ... in micro-batch order, the sum train_step forms; so N workers give the bytes of
one process accumulating the same micro-batches (at the workers' 1 BLAS thread).
"""
