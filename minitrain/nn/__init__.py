"""minitrain.nn: modules and layers to build models from, with PyTorch's `nn.Module` API.

    module.py         Module (parameters and children registered by assignment, dotted names, state dicts,
                      train/eval, freezing, packing into one flat ParameterBuffer), Parameter, inference()
    linear.py         Linear           y = x·W + b (optionally fused with GELU)
    conv.py           Conv1d, Conv2d   a kernel slid over a sequence / an image (PyTorch's layout)
    pooling.py        MaxPool1d/2d, AvgPool1d/2d   each window's largest value / mean
    recurrent.py      LSTM, GRU        a state carried along a sequence (PyTorch's gates and names)
    embedding.py      Embedding        y = W[idx]
    normalization.py  LayerNorm        y = (x − μ)/σ · w + b
    rms_norm.py       RMSNorm          y = x/rms(x) · w
    rotary.py         RotaryEmbedding  the cos/sin of rotary positions (θ, Llama 3 scaling), rope_positions
    apply_rotary.py   apply_rotary     x·cos + rotate_half(x)·sin: queries and keys rotated by their position
    dropout.py        Dropout          random zeros while training (the training RNG)
    activation.py     GELU, ReLU, Tanh, Sigmoid, Softmax
    container.py      Sequential, ModuleList, ModuleDict
    transformer.py    CausalSelfAttention, MLP, Block (GPT-2's)
    llama_attention.py LlamaAttention  grouped-query attention, rotary positions, the KV cache
    llama_mlp.py      LlamaMLP         down(silu(gate(x)) · up(x)), SwiGLU
    llama_shared.py   LLAMA_INIT_STD, KeyValueStore (what the Llama layers share)
    lora.py           LoRALinear       y = base(x) + (alpha/rank)·dropout(x)·A·B, the base frozen
    quantized.py      Linear4Bit       y = x·deq(W₄) + b, a frozen weight in 4-bit blocks (QLoRA's base)

Every layer's math is one op of `minitrain.autograd.functional` or `.conv` (or of `Tensor`), whose backward sits
beside its forward; a layer only owns parameters and calls it (LSTM and GRU compose such ops at each step).
Layers with random init take the training RNG as `rng=` (the library's models always pass it); without it they
draw from the default generator, which `minitrain.manual_seed(n)` seeds (minitrain/autograd/random.py).
"""

from minitrain.nn.activation import GELU, ReLU, Sigmoid, Softmax, Tanh
from minitrain.nn.container import ModuleDict, ModuleList, Sequential
from minitrain.nn.conv import Conv1d, Conv2d
from minitrain.nn.dropout import Dropout
from minitrain.nn.embedding import Embedding
from minitrain.nn.linear import Linear
from minitrain.nn.llama_attention import LlamaAttention
from minitrain.nn.llama_mlp import LlamaMLP
from minitrain.nn.lora import LoRALinear
from minitrain.nn.module import Module, Parameter, inference
from minitrain.nn.normalization import LayerNorm
from minitrain.nn.pooling import AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from minitrain.nn.quantized import Linear4Bit
from minitrain.nn.recurrent import GRU, LSTM
from minitrain.nn.rms_norm import RMSNorm
from minitrain.nn.rotary import RotaryEmbedding
from minitrain.nn.transformer import MLP, Block, CausalSelfAttention

__all__ = [
    "GELU", "GRU", "LSTM", "MLP", "AvgPool1d", "AvgPool2d", "Block", "CausalSelfAttention", "Conv1d", "Conv2d",
    "Dropout", "Embedding", "LayerNorm", "Linear", "Linear4Bit", "LlamaAttention", "LlamaMLP", "LoRALinear",
    "MaxPool1d", "MaxPool2d", "Module", "ModuleDict", "ModuleList", "Parameter", "RMSNorm", "ReLU",
    "RotaryEmbedding", "Sequential", "Sigmoid", "Softmax", "Tanh", "inference",
]  # fmt: skip
