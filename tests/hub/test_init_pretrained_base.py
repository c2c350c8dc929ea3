"""`minitrain init --base` on a pretrained Llama-family base (tiny GGUF, tiny HF folder, stand-in Hub): the model
section is the base's architecture + init_from read without its weights, the data's kind and samples are counted
with the base's tokenizer, the summary is printed, and nothing is written into the data folder."""

from __future__ import annotations

import json
import os

import pytest
from huggingface_hub import HfApi
from test_cli import run as cli
from test_hub_pretrained import HF_CONFIG, MINITRAIN, hf_folder, random_hf_state, write_gguf

from minitrain.commands.init_base import row_length
from minitrain.config.yaml_lines import parse_yaml

LLAMA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

CHAT = [{"messages": [{"role": "user", "content": f"hola {i}"}, {"role": "assistant", "content": "como"}]}
        for i in range(5)]


def write_jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


@pytest.fixture
def chat(tmp_path):
    folder = tmp_path / "chat"
    write_jsonl(folder / "train.jsonl", CHAT[:4])
    write_jsonl(folder / "val.jsonl", CHAT[4:])
    return folder


@pytest.fixture
def gguf(tmp_path):
    write_gguf(tmp_path / "tiny.gguf", random_hf_state(MINITRAIN), HF_CONFIG)
    return tmp_path / "tiny.gguf"


def listing(folder):
    return sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*"))


def init(argv, capsys, cwd, monkeypatch):
    monkeypatch.chdir(cwd)
    return cli(["init", *argv], capsys)


def test_row_length_is_the_shortest_power_of_two_from_256_that_holds_the_longest_record():
    assert row_length(67, 8192) == 256 and row_length(257, 8192) == 256 and row_length(258, 8192) == 512
    assert row_length(67, 64) == 64 and row_length(10**6, 10**6) == 2048


def test_a_gguf_base_and_chat_data_give_a_lora_config_and_the_summary(gguf, chat, tmp_path, capsys, monkeypatch):
    before = listing(chat)
    code, out, err = init(["--base", gguf, "--method", "lora", "--data", chat], capsys, tmp_path, monkeypatch)
    assert code == 0, err
    assert list(chat.iterdir()) and listing(chat) == before  # the data folder is only read
    cfg = parse_yaml((tmp_path / "config.yaml").read_text()).data
    assert cfg["model"] == {**MINITRAIN, "init_from": str(gguf)}  # the tiny base's context, 64, caps the rows
    assert cfg["data"] == {"train_path": str(chat / "train.jsonl"), "val_path": str(chat / "val.jsonl"),
                           "packing": "pack", "loss_on": "completion", "overflow": "error"}
    assert cfg["lora"]["target_modules"] == [*LLAMA_TARGETS] and cfg["lora"]["rank"] == 4  # width 32
    assert cfg["optimizer"]["lr_max"] == 2e-4 and cfg["name"] == "tiny-chat"
    assert out.startswith("Created config.yaml with:\n  Model: ")
    assert "(32 hidden, 2 layers, 4 heads / 2 key-value, " in out and "from its GGUF metadata" in out
    assert "5 samples detected: train 4, val 1; chat records, jsonl" in out and "Method: LoRA (rank=4" in out
    assert "Tokenizer: the base's own (266 tokens, chat template)" in out
    assert out.rstrip().endswith("Next: minitrain train config.yaml")
    code, _, err = init(["--base", gguf, "--data", chat], capsys, tmp_path, monkeypatch)
    assert code == 2 and "config.yaml: exists and is not a file this command wrote; pass --force" in err


def test_the_specs_init_template_lora_then_train_config_yaml(gguf, chat, tmp_path, capsys, monkeypatch):
    # yaml-mode spec §12 `init --template lora`, publish spec §1/§4.1 `init --base ...` then `train config.yaml`
    code, printed, err = init(["--base", gguf, "--method", "lora", "--data", chat, "-o", "-"], capsys, tmp_path,
                              monkeypatch)
    assert code == 0, err
    code, out, err = init(["--template", "lora", "--base", gguf, "--data", chat], capsys, tmp_path, monkeypatch)
    assert code == 0, err
    assert (tmp_path / "config.yaml").read_text() == printed.replace("<stdout>", "config.yaml")
    assert out.rstrip().endswith("Next: minitrain train config.yaml")
    code, out, err = cli(["validate", "config.yaml", "--set", "training.batch_size=1"], capsys)  # 4 tiny records
    assert code == 0, out + err
    code, _, err = init(["--template", "qlora", "--method", "lora", "--base", gguf, "--data", chat], capsys, tmp_path,
                        monkeypatch)
    assert code == 2 and err.strip() == "error: init: --template qlora means --method qlora, not lora"
    code, out, err = init(["--template", "lora", "--data", chat], capsys, tmp_path, monkeypatch)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "name it with --base" in err and not out


@pytest.mark.parametrize("method", ["full", "qlora"])
def test_full_and_qlora(gguf, chat, tmp_path, capsys, monkeypatch, method):
    code, out, err = init(["--base", gguf, "--method", method, "--data", chat, "-o", "-"], capsys, tmp_path,
                          monkeypatch)
    assert code == 0 and not (tmp_path / "config.yaml").exists()
    cfg = parse_yaml(out).data
    if method == "full":
        assert "lora" not in cfg and cfg["optimizer"]["lr_max"] == 2e-5 and "full fine-tuning" in err
    else:
        assert cfg["lora"]["quantize_base"] is True and "QLoRA (rank=4, alpha=8, 4-bit NF4 base)" in err


def test_a_hf_folder_with_prompt_completion_and_text_documents(tmp_path, capsys, monkeypatch):
    hf_folder(tmp_path / "base")
    pc = [{"prompt": "hola", "completion": " como"}] * 3
    write_jsonl(tmp_path / "pc" / "train.jsonl", pc)
    write_jsonl(tmp_path / "pc" / "validation.jsonl", pc[:1])
    code, out, err = init(["--base", tmp_path / "base", "--data", tmp_path / "pc", "-o", "-"], capsys, tmp_path,
                          monkeypatch)
    assert code == 0, err
    cfg = parse_yaml(out).data
    assert cfg["data"]["loss_on"] == "completion" and cfg["data"]["val_path"].endswith("validation.jsonl")
    assert "from its config.json" in err and "prompt_completion records" in err
    write_jsonl(tmp_path / "docs" / "train.jsonl", [{"text": "hola como " * 40}] * 2)  # 401 tokens: split in rows
    write_jsonl(tmp_path / "docs" / "val.jsonl", [{"text": "hola"}])
    code, out, err = init(["--base", tmp_path / "base", "--data", tmp_path / "docs", "-o", "-"], capsys, tmp_path,
                          monkeypatch)
    data = parse_yaml(out).data["data"]
    assert code == 0 and data["loss_on"] == "all" and data["overflow"] == "split"
    assert "2 records split" in err and "overflow: split   # 2 records are longer than a row" in out


def test_a_hub_base_is_described_from_its_config_and_tokenizer_without_its_weights(hub, chat, tmp_path, capsys,
                                                                                   monkeypatch):
    from fakehub import TOKEN

    hf_folder(tmp_path / "base")
    api = HfApi(endpoint=hub.url, token=TOKEN)
    api.create_repo("alice/tiny-llama")
    api.upload_folder(repo_id="alice/tiny-llama", folder_path=str(tmp_path / "base"))
    code, out, err = init(["--base", "alice/tiny-llama", "--data", chat, "-o", "-"], capsys, tmp_path, monkeypatch)
    assert code == 0, err
    assert parse_yaml(out).data["model"]["init_from"] == "alice/tiny-llama" and "config.json from the Hub" in err
    files = {p.name for p in (tmp_path / "hf").rglob("*") if p.is_file() and "snapshots" in p.parts}
    assert "config.json" in files and "tokenizer.json" in files and "model.safetensors" not in files


def test_data_without_a_validation_file_is_the_source_with_a_tenth_held_out(gguf, tmp_path, capsys, monkeypatch):
    write_jsonl(tmp_path / "only" / "train.jsonl", CHAT * 4)  # the spec's §4.1: ./data/train.jsonl and nothing else
    code, out, err = init(["--base", gguf, "--data", tmp_path / "only"], capsys, tmp_path, monkeypatch)
    assert code == 0, err
    cfg = parse_yaml((tmp_path / "config.yaml").read_text()).data
    assert cfg["data"]["source"] == str(tmp_path / "only") and cfg["data"]["split"] == {"train": 0.9, "val": 0.1}
    assert "train 18, val 2;" in out and os.listdir(tmp_path / "only") == ["train.jsonl"]
    (tmp_path / "docs").mkdir()
    for i in range(10):
        (tmp_path / "docs" / f"capitulo-{i}.txt").write_text(f"Capítulo {i}. Había una vez.", "utf-8")
    code, out, err = init(["--base", gguf, "--data", tmp_path / "docs", "--force"], capsys, tmp_path, monkeypatch)
    assert code == 0 and "train 9, val 1;" in out and "text records, documents" in out, err


def test_a_bad_record_is_refused_with_its_file_and_line(gguf, tmp_path, capsys, monkeypatch):
    write_jsonl(tmp_path / "bad" / "train.jsonl", [{"messages": "hola"}])
    write_jsonl(tmp_path / "bad" / "val.jsonl", CHAT[:1])
    code, _, err = init(["--base", gguf, "--data", tmp_path / "bad"], capsys, tmp_path, monkeypatch)
    assert code == 2 and "train.jsonl:1" in err


def test_data_paths_are_written_as_yaml_strings(gguf, chat, tmp_path, capsys, monkeypatch):
    odd = chat.rename(tmp_path / "d #1: x")  # '#' starts a comment and ': ' a mapping, unless quoted
    code, _, err = init(["--base", gguf, "--method", "lora", "--data", odd], capsys, tmp_path, monkeypatch)
    assert code == 0, err
    cfg = parse_yaml((tmp_path / "config.yaml").read_text()).data
    assert cfg["data"]["train_path"] == str(odd / "train.jsonl") and cfg["data"]["val_path"] == str(odd / "val.jsonl")


def test_a_generated_config_that_fails_validation_names_the_file_o_gives(gguf, chat, tmp_path, capsys, monkeypatch):
    import minitrain.commands.init_base as init_base

    real = init_base.base_config_text
    monkeypatch.setattr(init_base, "base_config_text", lambda *a: real(*a) + "no_such_key: 1\n")  # a broken writer
    code, _, err = init(["--base", gguf, "--data", chat, "-o", "elsewhere.yaml"], capsys, tmp_path, monkeypatch)
    assert code == 2 and "elsewhere.yaml:" in err and "config.yaml" not in err, err
    assert not (tmp_path / "elsewhere.yaml").exists()


def test_one_epoch_is_counted_as_validate_counts_it_and_the_run_validates_a_few_times(gguf, tmp_path, capsys,
                                                                                      monkeypatch):
    from minitrain.config import load_config
    from minitrain.training.text_run import complete_config, data_summary

    long = [{"messages": [{"role": "user", "content": f"hola {i}"}, {"role": "assistant", "content": "como " * 5}]}
            for i in range(48)]  # records too long to share a row of 64 positions: packing leaves rows part empty
    write_jsonl(tmp_path / "long" / "train.jsonl", long[:40])
    write_jsonl(tmp_path / "long" / "val.jsonl", long[40:])
    code, _, err = init(["--base", gguf, "--data", tmp_path / "long"], capsys, tmp_path, monkeypatch)
    assert code == 0, err
    text = (tmp_path / "config.yaml").read_text()
    cfg = parse_yaml(text).data
    said = int(text.split("# one epoch is ")[1].split()[0])
    counted = data_summary(complete_config(load_config(tmp_path / "config.yaml"))).steps_per_epoch
    assert said == counted == cfg["training"]["total_steps"] == 10  # 40 rows of one record, 4 a batch
    assert cfg["training"]["val_every"] == 2  # five validations in ten steps, not one a step


SHAPED = {
    "sharegpt": {"conversations": [{"from": "human", "value": "hola"}, {"from": "gpt", "value": "como"}]},
    "alpaca": {"instruction": "hola", "input": "", "output": "como"},
    "chat_prompt_completion": {"prompt": [{"role": "user", "content": "hola"}],
                               "completion": [{"role": "assistant", "content": "como"}]},
}


@pytest.mark.parametrize("shape", list(SHAPED))
def test_init_and_validate_detect_each_shape_and_refuse_preference_rows(gguf, tmp_path, capsys, monkeypatch, shape):
    write_jsonl(tmp_path / "d" / "train.jsonl", [SHAPED[shape]] * 4)
    write_jsonl(tmp_path / "d" / "val.jsonl", [SHAPED[shape]])
    code, out, err = init(["--base", gguf, "--data", tmp_path / "d"], capsys, tmp_path, monkeypatch)
    assert code == 0, err
    assert f"5 samples detected: train 4, val 1; {shape} records, jsonl" in out
    assert parse_yaml((tmp_path / "config.yaml").read_text()).data["data"]["loss_on"] == "completion"
    code, out, err = cli(["validate", "config.yaml", "--set", "training.batch_size=1"], capsys)
    assert code == 0, out + err
    write_jsonl(tmp_path / "d" / "val.jsonl", [SHAPED[shape], {"prompt": "hola", "chosen": "como", "rejected": "x"}])
    for argv in (["validate", "config.yaml", "--set", "training.batch_size=1"],
                 ["init", "--base", str(gguf), "--data", str(tmp_path / "d"), "--force"]):
        code, out, err = cli(argv, capsys)
        assert code == 2 and f"{tmp_path / 'd' / 'val.jsonl'}:2" in out + err and "no preference training yet" in \
            out + err and "Traceback" not in err, argv
