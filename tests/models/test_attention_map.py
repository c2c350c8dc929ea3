"""The attention read-out drawn: scripts/plot_attention.py on the committed lab-01 run, and its errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from minitrain.common.errors import ArgumentError
from minitrain.data.tokenizer import CharTokenizer
from minitrain.models.attention_map import attention_line
from minitrain.models.minigpt import MiniGPT
from minitrain.models.mlp_lm import MLPLanguageModel

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import plot_attention  # noqa: E402

TOKENIZER = CharTokenizer.load(ROOT / "data" / "processed" / "vocab.json")


def test_the_script_draws_the_committed_runs_attention(tmp_path, capsys):
    out = tmp_path / "attention.png"
    assert plot_attention.main([str(ROOT / "experiments" / "18-train-mini"), "--prompt", "vender|C4|",
                                "--out", str(out)]) == 0  # fmt: skip
    assert capsys.readouterr().out == f"vender|C4|venderíamos -> {out}\n"  # the held-out form, right
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (ROOT / "theory" / "figures" / "03-attention-vender-C4.png").is_file()


def test_the_line_drawn_is_bos_prompt_answer_eos():
    model = MiniGPT(n_layer=1, n_head=2, d_model=8, d_ff=16, vocab_size=64, max_seq_len=32, rng=0)
    ids, answer = attention_line(model, TOKENIZER, "comer|P1|")
    assert ids[0] == TOKENIZER.bos_id and TOKENIZER.decode(ids) == "comer|P1|" + answer
    assert ids[-1] == TOKENIZER.eos_id or len(ids) == 32
    assert attention_line(model, TOKENIZER, "comer|P1|", complete=False) == (
        [TOKENIZER.bos_id, *TOKENIZER.encode("comer|P1|")], "")
    probs = model.attention_probs(np.asarray([ids]))
    assert probs.shape == (1, 1, 2, len(ids), len(ids))


def test_a_model_without_attention_or_a_prompt_too_long_is_one_clear_error(capsys):
    with pytest.raises(ArgumentError, match="a MLPLanguageModel has no attention layers; only MiniGPT does"):
        attention_line(MLPLanguageModel(vocab_size=64, max_seq_len=32), TOKENIZER, "comer|P1|")
    model = MiniGPT(n_layer=1, n_head=2, d_model=8, d_ff=16, vocab_size=64, max_seq_len=8, rng=0)
    with pytest.raises(ValueError, match="the prompt is 10 positions with BOS, the model reads 8"):
        attention_line(model, TOKENIZER, "comer|P1|")
    assert plot_attention.main(["no/such/run", "--prompt", "x"]) == 2  # a source that is not there is bad input
    assert capsys.readouterr().err.startswith("error: model.init_from no/such/run: no such file or folder")
    assert plot_attention.main([str(ROOT / "experiments" / "18-train-mini"), "--prompt", "comer|P1|" * 4]) == 2
    assert capsys.readouterr().err == "error: attention: the prompt is 37 positions with BOS, the model reads 32\n"
