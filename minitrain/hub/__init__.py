"""Hugging Face interop: GPT-2 export, the model card, publishing to the Hub, and Hub model sources.

    gpt2.py          the config mapping and tensor table shared by MiniGPT and transformers' GPT-2
    run_folder.py    reading a run folder: its model file, results, manifest and config
    hf_tokenizer.py  the character vocabulary as a Hugging Face tokenizer.json
    card.py          the model card (README.md) written from the run
    export.py        `minitrain export`: the folder GPT2LMHeadModel.from_pretrained loads
    publish.py       `minitrain publish`: export, create_repo, upload_folder
    sources.py       `model.init_from` / `init --base`: weights from a path or a Hub repo
    hf_config.py     Llama / Qwen2 / Mistral config.json <-> minitrain's Llama, and the two state-dict layouts
    safetensors_folder.py   a model folder's weights (one file or shards; BF16/F16 widened to float32)
    gguf_file.py     a GGUF file: config, dequantized weights (q/k un-permuted), tokenizer fields
    pretrained.py    `load_pretrained_base` (HF folder, Hub id, GGUF) and `export_hf_folder`
"""
