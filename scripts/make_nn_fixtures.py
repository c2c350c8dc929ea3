"""Make tests/data/nn/torch_layers.npz: PyTorch's outputs and gradients for minitrain's conv, pooling and recurrent
layers to agree with (tests/nn/test_conv_recurrent.py), in float64.

    /tmp/tv/bin/python scripts/make_nn_fixtures.py [--out tests/data/nn/torch_layers.npz]

Run it with a scratch environment that has torch (never a minitrain dependency). For each case it stores the
inputs, the layer's parameters under torch's names, the outputs, a fixed random weighting R of each output, and
the gradient of L = Σ output ⊙ R with respect to every input and parameter: "{case}.{name}", plain float64 arrays
(np.savez, no object arrays: the test loads it with allow_pickle=False).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

CASES = {  # name: (the torch module, the input's shape, extra inputs)
    "conv2d": (lambda: torch.nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2)), (2, 3, 7, 6)),
    "conv2d_plain": (lambda: torch.nn.Conv2d(2, 3, 3, bias=False), (1, 2, 5, 5)),
    "conv1d": (lambda: torch.nn.Conv1d(3, 4, 3, stride=2, padding=1, dilation=2), (2, 3, 9)),
    "max_pool2d": (lambda: torch.nn.MaxPool2d(3, stride=2, padding=1), (2, 2, 7, 7)),
    "max_pool1d": (lambda: torch.nn.MaxPool1d(3, stride=2, padding=1, dilation=2), (2, 2, 11)),
    "avg_pool2d": (lambda: torch.nn.AvgPool2d((3, 2), stride=(2, 1), padding=1), (2, 2, 7, 6)),
    "avg_pool1d": (lambda: torch.nn.AvgPool1d(3, stride=2, padding=1), (2, 2, 9)),
    "lstm": (lambda: torch.nn.LSTM(3, 4, num_layers=2, batch_first=True), (2, 5, 3)),
    "gru": (lambda: torch.nn.GRU(3, 4, num_layers=2, batch_first=True), (2, 5, 3)),
    "lstm_time_major": (lambda: torch.nn.LSTM(3, 4, bias=False), (5, 2, 3)),
}


def case(name: str, make, shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
    torch.manual_seed(0)
    module = make().double()
    out = {"x": rng.standard_normal(shape)}
    inputs = [torch.tensor(out["x"], requires_grad=True)]
    if name in ("lstm", "gru"):  # a given initial state: its gradient is checked too
        out["h0"] = rng.standard_normal((2, 2, 4))
        inputs.append(torch.tensor(out["h0"], requires_grad=True))
        if name == "lstm":
            out["c0"] = rng.standard_normal((2, 2, 4))
            inputs.append(torch.tensor(out["c0"], requires_grad=True))
    if name == "lstm":
        output, (h_n, c_n) = module(inputs[0], (inputs[1], inputs[2]))
        results = {"output": output, "h_n": h_n, "c_n": c_n}
    elif name == "gru":
        output, h_n = module(inputs[0], inputs[1])
        results = {"output": output, "h_n": h_n}
    elif name.startswith("lstm"):
        output, (h_n, c_n) = module(inputs[0])
        results = {"output": output, "h_n": h_n, "c_n": c_n}
    else:
        results = {"output": module(inputs[0])}
    loss = 0
    for key, value in results.items():
        out[key] = value.detach().numpy()
        out[f"R_{key}"] = rng.standard_normal(value.shape)
        loss = loss + (value * torch.tensor(out[f"R_{key}"])).sum()
    loss.backward()
    for key, tensor in zip(("x", "h0", "c0"), inputs, strict=False):
        out[f"grad_{key}"] = tensor.grad.numpy()
    for key, param in module.named_parameters():
        out[f"param_{key}"] = param.detach().numpy()
        out[f"grad_{key}"] = param.grad.numpy()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/data/nn/torch_layers.npz")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    arrays = {f"{name}.{key}": value for name, (make, shape) in CASES.items()
              for key, value in case(name, make, shape, rng).items()}
    np.savez_compressed(args.out, **arrays)
    print(f"{args.out}: {len(CASES)} cases, {len(arrays)} arrays, torch {torch.__version__}")


if __name__ == "__main__":
    main()
