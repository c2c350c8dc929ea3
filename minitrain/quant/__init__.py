"""Quantization: weights in fewer bits, after training (PTQ), during training (QAT) and under a LoRA base (QLoRA).

    bit_packing.py small integers packed 8/bits to a byte
    blockwise.py   4-bit blocks with an absmax scale each, NF4 and FP4 code books, double quantization (QLoRA)
    scheme.py      how a weight is quantized: bits, symmetric or not, the units sharing a scale, range methods
    grid.py        the integer grid: a unit's scale and zero point, rounding onto the grid and back (lab 05)
    affine.py      integer quantization: scale and zero point per tensor, channel or group; range methods
    tape_ops.py    tape ops: a linear layer over 4-bit blocks, fake quantization with a straight-through backward
    qfile.py       the quantized model file's layout, and reading it back as float32

Everything is NumPy: the integers are a storage format, and the products run in float32 on dequantized values.
These are formats and ops on arrays (minitrain.nn's Linear4Bit is built on them); the passes over a model's layers
are the training room's: minitrain/training/ptq.py (PTQ) and minitrain/training/qat.py (QAT).
"""
