"""Damage to a GPT-2 base, generated: config.json keys set to values MiniGPT cannot reproduce (or no value at all),
tokenizer files cut or rewritten. Reading the base (`load_pretrained_base`, what every run, `sample`, `eval` and
`export` do first) either succeeds with the tokenizer's ids fitting the embedding, or refuses with one UserError,
exit 2, naming the file; never another exception. Conventions of tests/training/test_damage.py (derandomized in
`make test`, more examples under MINITRAIN_DAMAGE_EXAMPLES)."""

from __future__ import annotations

import json
import os
import shutil

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_damage import count
from test_gpt2_base import gpt2_folder

from minitrain.common.errors import UserError
from minitrain.hub.pretrained import load_pretrained_base

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "12"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
KEYS = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "activation_function",
        "layer_norm_epsilon", "resid_pdrop", "tie_word_embeddings", "scale_attn_by_inverse_layer_idx", "model_type")
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=True), st.text(max_size=8),
                   st.sampled_from(["gelu", "relu", "gelu_new", "gpt2", 1e-6, 4, 3, 200, 0]))
FILES = ("tokenizer.json", "tokenizer_config.json")


@settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3),
       cut=st.one_of(st.none(), st.tuples(st.sampled_from(FILES), st.integers(0, 400))))
def test_a_damaged_gpt2_base_loads_or_is_one_error(tmp_path_factory, changes, cut):
    count("gpt-2 bases")
    folder = tmp_path_factory.mktemp("gpt2")
    shutil.rmtree(folder)
    gpt2_folder(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    if cut is not None:
        name, keep = cut
        (folder / name).write_bytes((folder / name).read_bytes()[:keep])
    try:
        model, state, tokenizer, _ = load_pretrained_base(folder)
    except UserError as exc:
        assert exc.exit_code == 2 and str(folder) in str(exc) and "\n" not in str(exc)
        return
    assert tokenizer.vocab_size <= model["vocab_size"] == state["transformer.wte.weight"].shape[0]
