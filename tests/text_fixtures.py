"""A tiny real tokenizer for the text-data tests: a byte-level BPE trained here with the `tokenizers` library, and
chat templates rendered with jinja2's sandbox, behind the few attributes `text_examples.TextTokenizer` names."""

from __future__ import annotations

import functools

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from minitrain.data.chat_template import render_chat

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>"]
CORPUS = [
    "Conjuga «vender» en condicional, primera persona del plural.", "venderíamos", "Hola, ¿qué tal?",
    "The quick brown fox jumps over the lazy dog.", "system user assistant", "[INST] [/INST]",
    "Érase una vez un verbo que no quería conjugarse.", "2 + 2 = 4", "\n  ab\n\n  ab\n   ñ. \n\n",
]

# SmolLM2-Instruct's template (ChatML, a default system message when the conversation has none).
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Llama-2's shape: BOS first, an assistant turn ends with EOS and nothing after it.
INST = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
    "{% elif m['role'] == 'assistant' %} {{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
)
# A template that rewrites earlier turns (as those that drop past reasoning do): the prefix property fails.
REWRITING = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' and not loop.last %}"
    "...{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@functools.cache
def _bpe() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    return tokenizer


class TinyTokenizer:
    """The TextTokenizer protocol over a tiny BPE: ChatML's ids by default (EOS `<|im_end|>`, no BOS)."""

    def __init__(self, chat_template: str | None = CHATML, bos: str | None = None, eos: str | None = "<|im_end|>",
                 add_bos: bool = False) -> None:
        self._tokenizer = _bpe()
        self.bos_id = None if bos is None else self._tokenizer.token_to_id(bos)
        self.eos_id = None if eos is None else self._tokenizer.token_to_id(eos)
        self.pad_id = self._tokenizer.token_to_id("<|endoftext|>")
        self.chat_template = chat_template
        self.bos, self.eos, self.add_bos = bos, eos, add_bos
        self.vocab_size = self._tokenizer.get_vocab_size()

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if add_special_tokens and self.add_bos else ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = False) -> str:
        return render_chat(self.chat_template, messages, add_generation_prompt,
                           {"bos_token": self.bos or "", "eos_token": self.eos or ""}, "tiny chat template")


def inst_tokenizer() -> TinyTokenizer:
    """Llama-2-like: BOS `<s>` added by encode(add_special_tokens=True), EOS `</s>`, the [INST] template."""
    return TinyTokenizer(INST, bos="<s>", eos="</s>", add_bos=True)
