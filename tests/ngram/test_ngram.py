"""The character n-gram baseline: counts, Kneser–Ney and add-k, tuning, and the committed results."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from minitrain.data.batcher import encode_split
from minitrain.data.corpus import load_records
from minitrain.data.tokenizer import CharTokenizer
from minitrain.evaluation.metrics import PerplexityMeter
from minitrain.ngram.add_k import AddKLM
from minitrain.ngram.baseline import load_baseline_config, render_readme, run_baseline
from minitrain.ngram.counts import NgramCounts, pad_sequences, suffix_keys
from minitrain.ngram.kneser_ney import KneserNeyLM
from minitrain.ngram.tuning import evaluate, grid_search

PAD, BOS, EOS = 0, 1, 2
REPO = Path(__file__).resolve().parents[2]


def load_script():
    """scripts/ngram_baseline.py as a module, so its main() runs in-process."""
    spec = importlib.util.spec_from_file_location("ngram_baseline_script", REPO / "scripts" / "ngram_baseline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line(text: str) -> list[int]:
    """Encode a line over the alphabet a, b, c, ... as [BOS] + ids + [EOS] (a = 3, b = 4, ...)."""
    return [BOS, *(3 + ord(ch) - ord("a") for ch in text), EOS]


def batches_of(sequences: list[list[int]]) -> list[SimpleNamespace]:
    """One batch like the batcher's, counting every real target (input = e[:-1], target = e[1:])."""
    tokens = pad_sequences(sequences)
    target = tokens[:, 1:]
    return [SimpleNamespace(input=tokens[:, :-1], target=target, loss_mask=target != PAD)]


def random_corpus(rng: np.random.Generator, n: int, vocab_size: int, max_len: int = 9) -> list[list[int]]:
    return [[BOS, *rng.integers(3, vocab_size, size=rng.integers(1, max_len)).tolist(), EOS] for _ in range(n)]


# --- counting --------------------------------------------------------------------------------------------------


def test_suffix_keys_pack_the_window_ending_at_each_position():
    tokens = np.array([[1, 3, 4, 5]])
    keys, complete = suffix_keys(tokens, 3, vocab_size=7)
    assert complete.tolist() == [[False, False, True, True]]
    assert keys[0, 2] == 1 * 49 + 3 * 7 + 4 and keys[0, 3] == 3 * 49 + 4 * 7 + 5


def brute_force_grams(sequences, order):
    """Every n-gram that ends on a target position (t ≥ 1) and does not reach left of BOS."""
    grams = Counter()
    for e in sequences:
        for t in range(1, len(e)):
            for j in range(1, min(order, t + 1) + 1):
                grams[tuple(e[t - j + 1 : t + 1])] += 1
    return grams


def test_counts_match_brute_force_raw_and_continuation_counts():
    rng = np.random.default_rng(3)
    vocab_size, order = 7, 4
    seqs = random_corpus(rng, 25, vocab_size)
    counts = NgramCounts(seqs, vocab_size, order)
    grams = brute_force_grams(seqs, order)
    for j in range(1, order + 1):
        expected = {g: c for g, c in grams.items() if len(g) == j}
        got = {}
        for key, c in zip(counts.keys[j].tolist(), counts.raw[j].tolist(), strict=True):
            digits = [(key // vocab_size**i) % vocab_size for i in range(j - 1, -1, -1)]
            got[tuple(digits)] = c
        assert got == expected
        if j < order:
            left = Counter(g[1:] for g in grams if len(g) == j + 1)
            keys = [tuple((k // vocab_size**i) % vocab_size for i in range(j - 1, -1, -1)) for k in counts.keys[j]]
            assert counts.continuation[j].tolist() == [left[g] for g in keys]


# --- a slow, plainly written Kneser–Ney to check the vectorised one against -------------------------------------


def reference_discounts(adjusted_counts):
    """Chen & Goodman (1998), eq. 26, written out from the paper, not taken from the code: with n_k the number
    of grams whose adjusted count is k, Y = n1 / (n1 + 2·n2), D1 = 1 − 2·Y·n2/n1, D2 = 2 − 3·Y·n3/n2 and
    D3+ = 3 − 4·Y·n4/n3. Where the paper's formula divides by zero (tiny corpora), D_k = Y, and Y = 0.5 when
    n1 = n2 = 0 (minitrain/ngram/kneser_ney.py's documented fallback)."""
    n1, n2, n3, n4 = (sum(1 for a in adjusted_counts if a == k) for k in (1, 2, 3, 4))
    y = n1 / (n1 + 2 * n2) if n1 + n2 > 0 else 0.5
    d1 = 1 - 2 * y * n2 / n1 if n1 else y
    d2 = 2 - 3 * y * n3 / n2 if n2 else y
    d3 = 3 - 4 * y * n4 / n3 if n3 else y
    return [d1, d2, d3]


def test_the_reference_discounts_follow_the_paper():
    # n1 = 4, n2 = 2, n3 = 1, n4 = 1: Y = 4/8 = 0.5; D1 = 1 − 2·0.5·2/4 = 0.5; D2 = 2 − 3·0.5·1/2 = 1.25;
    # D3+ = 3 − 4·0.5·1/1 = 1.0
    assert reference_discounts([1, 1, 1, 1, 2, 2, 3, 4]) == [0.5, 1.25, 1.0]
    assert reference_discounts([5, 7]) == [0.5, 0.5, 0.5]  # n1 = n2 = n3 = 0: every D falls back to Y = 0.5


def reference_kneser_ney(sequences, vocab_size, order, scale, history):
    grams = brute_force_grams(sequences, order)

    def adjusted(g):
        if len(g) == order or g[0] == BOS:
            return grams[g]
        return len({h[0] for h in grams if len(h) == len(g) + 1 and h[1:] == g})

    p = np.array([0.0, 0.0] + [1.0 / (vocab_size - 2)] * (vocab_size - 2))
    for j in range(1, order + 1):
        level = {g: adjusted(g) for g in grams if len(g) == j}
        d = [min(max(scale * dk, 0.0), k) for k, dk in enumerate(reference_discounts(level.values()), start=1)]
        if len(history) < j - 1:
            continue  # the window would reach left of BOS
        context = tuple(history[len(history) - (j - 1) :])
        seen = {g[-1]: a for g, a in level.items() if g[:-1] == context}
        if not seen:
            continue  # unseen context: everything backs off
        total = sum(seen.values())
        new = p * sum(d[min(a, 3) - 1] for a in seen.values()) / total
        for w, a in seen.items():
            new[w] += (a - d[min(a, 3) - 1]) / total
        p = new
    return p


@pytest.mark.parametrize("order", [1, 2, 3, 5])
@pytest.mark.parametrize("scale", [0.5, 1.0, 1.5])
def test_kneser_ney_matches_the_plain_reference(order, scale):
    rng = np.random.default_rng(order)
    vocab_size = 7
    seqs = random_corpus(rng, 30, vocab_size)
    model = KneserNeyLM(NgramCounts(seqs, vocab_size, 5), order, scale)
    queries = seqs[:4] + random_corpus(rng, 4, vocab_size)  # seen and (mostly) unseen contexts
    probs = model.probs(pad_sequences(queries))
    for row, q in enumerate(queries):
        for t in range(len(q)):
            expected = reference_kneser_ney(seqs, vocab_size, order, scale, q[: t + 1])
            np.testing.assert_allclose(probs[row, t], expected, rtol=1e-12, atol=1e-15)


# --- normalisation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", range(1, 9))
def test_every_distribution_sums_to_one_with_zero_mass_on_pad_and_bos(order):
    rng = np.random.default_rng(10 + order)
    vocab_size = 12
    seqs = random_corpus(rng, 40, vocab_size - 2)  # the two largest symbols never occur in training
    counts = NgramCounts(seqs, vocab_size, 8)
    queries = pad_sequences(seqs[:5] + random_corpus(rng, 5, vocab_size))
    for model in (KneserNeyLM(counts, order, 0.8), KneserNeyLM(counts, order, 1.3), AddKLM(counts, order, 0.1)):
        p = model.probs(queries)
        np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-12)
        assert (p[..., [PAD, BOS]] == 0).all()
        assert (p[..., 2:] > 0).all()  # unseen symbols and unseen contexts keep some mass


def test_next_log_probs_is_the_last_position_of_each_prefix():
    counts = NgramCounts([line("abc"), line("abd"), line("bc")], 8, 3)
    model = KneserNeyLM(counts, 3)
    prefixes = [[BOS], [BOS, 3, 4], [BOS, 4]]
    lp = model.next_log_probs(prefixes)
    for row, prefix in enumerate(prefixes):
        np.testing.assert_array_equal(lp[row], model.log_probs(np.array([prefix]))[0, -1])


# --- perplexity by hand ----------------------------------------------------------------------------------------


def test_kneser_ney_perplexity_computed_by_hand():
    # Train on "ab", "ab", "b" (BOS=1, EOS=2, a=3, b=4; 3 predictable symbols), order 2, textbook discounts.
    # Level 1 uses continuation counts: EOS follows {b} -> 1, a follows {BOS} -> 1, b follows {a, BOS} -> 2.
    #   Count-of-counts n1=2, n2=1, n3=n4=0: Y = 2/4 = 0.5, D1 = 1 - 2·0.5·1/2 = 0.5, D2 = 2 - 0 = 2,
    #   D3+ falls back to Y = 0.5. Total 4: mass EOS = a = 0.5/4, b = 0; γ = (0.5 + 0.5 + 2)/4 = 0.75.
    #   p1 = (EOS 0.375, a 0.375, b 0.25).
    # Level 2 uses raw counts: BOS a ×2, a b ×2, b EOS ×3, BOS b ×1. n1=1, n2=2, n3=1, n4=0:
    #   Y = 1/5, D1 = 1 - 2·0.2·2 = 0.2, D2 = 2 - 3·0.2·1/2 = 1.7, D3+ = 3 - 0 = 3.
    # Score "ba":
    #   p(b | BOS) = (1 - 0.2)/3 + (1.7 + 0.2)/3 · 0.25 = 0.425
    #   p(a | b)   : context b holds only "b EOS" (count 3, discount 3), so γ = 1 and p = p1(a) = 0.375
    #   p(EOS | a) : context a holds "a b" (count 2): γ = 1.7/2 = 0.85, p = 0.85 · 0.375 = 0.31875
    counts = NgramCounts([line("ab"), line("ab"), line("b")], 5, 2)
    model = KneserNeyLM(counts, 2, 1.0)
    np.testing.assert_allclose(model.discounts[0], [0.5, 2.0, 0.5])
    np.testing.assert_allclose(model.discounts[1], [0.2, 1.7, 3.0])
    meter = evaluate(model, batches_of([line("ba")]))
    assert meter.count == 3
    assert meter.ppl == pytest.approx(math.exp(-(math.log(0.425) + math.log(0.375) + math.log(0.31875)) / 3))


def test_add_k_perplexity_computed_by_hand():
    # Same training lines, order 2, k = 1, V' = 3:
    #   p(b | BOS) = (1 + 1)/(3 + 3), p(a | b) = (0 + 1)/(3 + 3), p(EOS | a) = (0 + 1)/(2 + 3).
    counts = NgramCounts([line("ab"), line("ab"), line("b")], 5, 2)
    meter = evaluate(AddKLM(counts, 2, 1.0), batches_of([line("ba")]))
    assert meter.ppl == pytest.approx((2 / 6 * 1 / 6 * 1 / 5) ** (-1 / 3))


def test_order_one_kneser_ney_follows_the_formula():
    # Order 1 on "aab": raw counts a = 2, b = 1, EOS = 1 over V' = 3; γ collects D1 twice (b, EOS) and D2 once (a).
    counts = NgramCounts([line("aab")], 5, 1)
    model = KneserNeyLM(counts, 1, 1.0)
    d1, d2, _ = model.discounts[0]
    gamma = (2 * d1 + d2) / 4
    expected = np.array([0, 0, (1 - d1) / 4 + gamma / 3, (2 - d2) / 4 + gamma / 3, (1 - d1) / 4 + gamma / 3])
    np.testing.assert_allclose(model.probs(np.array([[BOS]]))[0, 0], expected)


# --- conditioning on the prefix --------------------------------------------------------------------------------


def test_prediction_depends_on_the_prefix_from_bos_truncated_to_the_order():
    # After BOS, "a" is always followed by "b"; elsewhere "a" is always followed by "c".
    seqs = [line("ab"), line("ab"), line("cac"), line("dac"), line("bac")]
    counts = NgramCounts(seqs, 8, 4)
    model = KneserNeyLM(counts, 3)
    lp = model.next_log_probs([[BOS, 3], [BOS, 5, 3]])  # "a" right after BOS vs "a" after "c"
    assert lp[0].argmax() == 4 and lp[1].argmax() == 5
    # Order 3 reads the last two symbols: what lies before them does not matter, what lies in them does.
    lp = model.next_log_probs([[BOS, 4, 5, 3], [BOS, 6, 5, 3], [BOS, 6, 3, 3]])
    np.testing.assert_array_equal(lp[0], lp[1])
    assert not np.allclose(lp[1], lp[2])


# --- tuning ----------------------------------------------------------------------------------------------------


def test_grid_search_picks_the_lowest_dev_perplexity_and_reports_every_trial():
    rng = np.random.default_rng(5)
    train = [line(w) for w in ["abcab", "abcabc", "bcabca", "cabcab", "abcabcab"] * 3]
    dev = batches_of([line("abcabca"), line("bcab")])
    counts = NgramCounts(train + random_corpus(rng, 5, 6), 6, 4)
    candidates = [{"order": o, "discount_scale": s} for o in (1, 2, 3, 4) for s in (0.5, 1.0)]
    tuned = grid_search(lambda **p: KneserNeyLM(counts, **p), candidates, dev)
    assert [t["order"] for t in tuned.trials] == [1, 1, 2, 2, 3, 3, 4, 4]
    best = min(tuned.trials, key=lambda t: t["dev_ppl"])
    assert tuned.dev_ppl == best["dev_ppl"] and tuned.params["order"] == best["order"] > 1
    assert tuned.model.order == tuned.params["order"]
    assert evaluate(tuned.model, dev).ppl == tuned.dev_ppl


def test_evaluate_counts_only_the_masked_positions():
    counts = NgramCounts([line("ab"), line("b")], 5, 2)
    model = KneserNeyLM(counts, 2)
    (batch,) = batches_of([line("ab"), line("b")])
    answer_only = SimpleNamespace(input=batch.input, target=batch.target, loss_mask=batch.loss_mask.copy())
    answer_only.loss_mask[:, 0] = False  # do not count the first target of each line
    direct = PerplexityMeter()
    lp = model.log_probs(batch.input)
    direct.update(lp, batch.target, answer_only.loss_mask)
    assert evaluate(model, [answer_only]).count == batch.loss_mask.sum() - 2 == direct.count
    assert evaluate(model, [answer_only]).ppl == direct.ppl


# --- the baseline run: config, honest tuning, script ------------------------------------------------------------

ENDINGS = {
    "ar": ["o", "as", "a", "amos", "áis", "an"],
    "er": ["o", "es", "e", "emos", "éis", "en"],
    "ir": ["o", "es", "e", "imos", "ís", "en"],
}
TRAIN_VERBS = ["hablar", "mirar", "tomar", "llevar", "bailar", "cantar", "nadar", "lavar",
               "comer", "beber", "correr", "temer", "vivir", "subir", "abrir", "escribir"]


def present_tense(verbs: list[str]) -> list[dict]:
    """Records of the regular present indicative: a tiny stand-in for the corpus, same format."""
    out = []
    for verb in verbs:
        for person, ending in enumerate(ENDINGS[verb[-2:]], start=1):
            form = verb[:-2] + ending
            out.append({"verb": verb, "tense": "P", "person": person, "form": form, "text": f"{verb}|P{person}|{form}"})
    return out


def write_corpus(folder, splits: dict[str, list[dict]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, records in splits.items():
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        (folder / f"{name}.jsonl").write_text(text, encoding="utf-8")
    all_verbs = [*TRAIN_VERBS, "saltar", "meter", "partir", "caminar", "vender", "dividir", "pasar", "sufrir"]
    CharTokenizer.from_texts(r["text"] for r in present_tense(all_verbs)).save(folder / "vocab.json")
    (folder / "manifest.json").write_text('{"generator": "test"}\n')


def write_config(path, data_dir, **overrides) -> None:
    cfg = {
        "data": {f"{s}_path": str(data_dir / f"{s}.jsonl") for s in ("train", "dev", "val")}
        | {"vocab_path": str(data_dir / "vocab.json"), "manifest_path": str(data_dir / "manifest.json")},
        "eval": {"batch_size": 7},
        "kneser_ney": {"orders": [1, 2, 3, 4, 5, 6, 7, 8], "discount_scales": [0.5, 1.0, 1.5]},
        "add_k": {"orders": [1, 2, 3], "ks": [0.1, 1.0]},
    }
    for dotted_key, value in overrides.items():
        section, key = dotted_key.split("__")
        cfg[section][key] = value
    path.write_text(yaml.safe_dump(cfg))


@pytest.fixture
def corpus(tmp_path):
    data = tmp_path / "data"
    write_corpus(data, {"train": present_tense(TRAIN_VERBS), "dev": present_tense(["saltar", "meter", "partir"]),
                        "val": present_tense(["caminar", "vender", "dividir"])})
    write_config(tmp_path / "config.yaml", data)
    return tmp_path


def test_val_contents_do_not_change_the_choice(corpus):
    cfg = load_baseline_config(corpus / "config.yaml")
    first = run_baseline(cfg).results
    write_corpus(corpus / "data", {"val": present_tense(["pasar", "sufrir"])})  # a different val split
    second = run_baseline(cfg).results
    assert second["val_ppl"] != first["val_ppl"] and second["val_records"] == 12  # val really changed
    for key in ("order", "discount_scale", "discounts", "dev_ppl", "dev_ppl_grid", "train_ppl"):
        assert second[key] == first[key]
    for key in ("order", "k", "dev_ppl_grid"):
        assert second["add_k_reference"][key] == first["add_k_reference"][key]
    best = min((ppl, int(o), float(s)) for o, row in first["dev_ppl_grid"].items() for s, ppl in row.items())
    assert (first["order"], first["discount_scale"]) == best[1:] and first["dev_ppl"] == best[0]


def test_baseline_counts_the_batchers_answer_positions(corpus):
    results = run_baseline(load_baseline_config(corpus / "config.yaml")).results
    tok = CharTokenizer.load(corpus / "data" / "vocab.json")
    for split in ("train", "dev", "val"):
        records = load_records(corpus / "data" / f"{split}.jsonl")
        expected = sum(len(r["form"]) + 1 for r in records)  # the form and EOS
        assert results["counted_tokens"][split] == expected == encode_split(records, tok).loss_mask.sum()
    assert results["add_k_reference"]["val_ppl"] > results["val_ppl"]  # KN beats the simple reference


def test_script_is_deterministic_and_writes_results_and_readme(corpus, capsys):
    script = load_script()
    for out in ("a", "b"):
        assert script.main(["--config", str(corpus / "config.yaml"), "--out-dir", str(corpus / out)]) == 0
    assert "seconds: load" in capsys.readouterr().out
    for name in ("results.json", "README.md"):
        assert (corpus / "a" / name).read_bytes() == (corpus / "b" / name).read_bytes()
    readme = (corpus / "a" / "README.md").read_text()
    results = json.loads((corpus / "a" / "results.json").read_text())
    assert f"{results['val_ppl']:.3f}" in readme and f"order {results['order']}" in readme
    assert sorted(p.name for p in (corpus / "a").iterdir()) == ["README.md", "results.json"]  # no temp files


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"kneser_ney__order": 3}, "kneser_ney.order"),
        ({"kneser_ney__orders": [2, 9]}, "kneser_ney.orders.1"),
        ({"add_k__ks": [0.0]}, "add_k.ks.0"),
        ({"data__loss_on": "prompt"}, "data.loss_on"),
    ],
)
def test_bad_config_is_one_clear_error(corpus, capsys, override, message):
    write_config(corpus / "bad.yaml", corpus / "data", **override)
    code = load_script().main(["--config", str(corpus / "bad.yaml"), "--out-dir", str(corpus / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (corpus / "out").exists()


def test_missing_files_are_clear_errors(corpus, capsys):
    script = load_script()
    assert script.main(["--config", str(corpus / "nope.yaml"), "--out-dir", str(corpus / "out")]) == 2
    assert "nope.yaml: config file not found" in capsys.readouterr().err
    (corpus / "data" / "dev.jsonl").unlink()
    assert script.main(["--config", str(corpus / "config.yaml"), "--out-dir", str(corpus / "out")]) != 0
    err = capsys.readouterr().err
    assert "dev.jsonl" in err and "not found" in err and "Traceback" not in err
    assert not (corpus / "out").exists()


def test_unwritable_out_dir_is_one_clear_error(corpus, capsys):
    (corpus / "a-file").write_text("")
    out = corpus / "a-file" / "out"  # under a file: the folder cannot be created
    assert load_script().main(["--config", str(corpus / "config.yaml"), "--out-dir", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "a-file" in err and "Traceback" not in err


def assert_same_results(got, expected, path="results"):
    """Equal JSON trees; floats (rounded to 6 decimals when written) may differ by rounding noise only."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(expected), path
        for key in expected:
            assert_same_results(got[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, rel=0, abs=2e-6), path
    else:
        assert got == expected, path


@pytest.mark.slow
def test_committed_results_are_reproduced_by_the_script(tmp_path, monkeypatch, capsys):
    experiment = REPO / "experiments" / "14-ngram-baseline"
    monkeypatch.chdir(REPO)  # the config's data paths are relative to the repository root
    code = load_script().main(["--config", str(experiment / "config.yaml"), "--out-dir", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    committed = json.loads((experiment / "results.json").read_text(encoding="utf-8"))
    assert_same_results(json.loads((tmp_path / "results.json").read_text(encoding="utf-8")), committed)
    manifest = (REPO / "data" / "processed" / "manifest.json").read_bytes()
    assert committed["data_manifest_hash"] == hashlib.sha256(manifest).hexdigest()
    cfg = load_baseline_config(experiment / "config.yaml")
    assert (experiment / "README.md").read_text(encoding="utf-8") == render_readme(committed, cfg.data.manifest_path)
