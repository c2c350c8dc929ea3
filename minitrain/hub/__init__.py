"""Hugging Face interop: the Hub client's side of minitrain, model sources, export, the model card, publishing.

    run_folder.py    reading a run folder: its model file, results, manifest and config
    card.py          the model card (README.md) written from the run
    export_hf.py     `minitrain export`: the folder GPT2LMHeadModel.from_pretrained loads
    export_gguf.py   `minitrain export --format gguf`: one GGUF file llama.cpp loads
    upload.py        `minitrain publish`: export, create_repo, upload_folder
    sources.py       `model.init_from` / `init --base`: weights from a path or a Hub repo
    pretrained.py    `load_pretrained_base` (HF folder, Hub id, GGUF) and `export_hf_folder`

The file formats these read and write (GGUF, safetensors folders, the Hugging Face configs) are minitrain/formats/.
"""
