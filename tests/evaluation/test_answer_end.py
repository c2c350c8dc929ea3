"""evaluation/answers.exact_match stops an answer where the chat template ends it: Gemma ends a turn with
<end_of_turn>, not its EOS, and a model goes on writing after it (the next turn); stopping at EOS alone would
score that as part of the answer."""

from pathlib import Path

from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.data.text_records import TextRecord
from minitrain.evaluation.answers import exact_match
from minitrain.nn import Module

GEMMA_HF = Path(__file__).resolve().parents[1] / "data" / "spm" / "gemma-hf"


class Continues(Module):
    """Greedy generation as models/decoder.generate does it (a row stops at `eos_id`, left out), of a model that
    writes the answer, <end_of_turn>, then a new turn and only then EOS."""

    def __init__(self, tokenizer: PretrainedTokenizer, answer: str) -> None:
        super().__init__()
        self.tokenizer, self.answer = tokenizer, answer

    def generate(self, prompts, max_new_tokens, eos_id=None, vocab_limit=None):
        t = self.tokenizer
        written = [*t.encode(self.answer), t.turn_end_id(), *t.encode("\nuser"), t.eos_id]
        return [written[: written.index(eos_id)][:max_new_tokens] for _ in prompts]


def test_a_gemma_answer_ends_at_end_of_turn_not_at_eos():
    tokenizer = PretrainedTokenizer.from_folder(GEMMA_HF)
    assert tokenizer.turn_end_id() != tokenizer.eos_id
    records = [TextRecord("test:1", "messages", {"messages": [{"role": "user", "content": "Conjuga «vender»."},
                                                              {"role": "assistant", "content": "vendo"}]})]
    scored = exact_match(Continues(tokenizer, "vendo"), tokenizer, records, max_new_tokens=16)
    assert scored == {"exact_match": 1.0, "answers": ["vendo"]}
