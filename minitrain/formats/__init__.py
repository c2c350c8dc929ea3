"""Model file formats of other tools, read and written with no network: GGUF, Hugging Face folders and configs.

    gpt2.py                 the config mapping and tensor table shared by MiniGPT and transformers' GPT-2
    hf_config.py            Llama / Qwen2 / Mistral / Gemma 2 / Gemma 3 config.json <-> minitrain, the state layouts
    hf_tokenizer.py         the character vocabulary as a Hugging Face tokenizer.json
    safetensors_folder.py   a model folder's weights (one file or shards; BF16/F16 widened to float32)
    gguf_read.py            a GGUF file: config, dequantized weights (q/k un-permuted), tokenizer fields; a base's type
    gguf_layouts.py         llama.cpp's GGUF layouts (llama, qwen2, gemma2, gemma3): config keys, tensor names, undoing
    gguf_write.py           a model's state dict as one GGUF file (the Llama family's layout and GPT-2's)
    gguf_dtypes.py          the dtypes a GGUF is written in, and llama.cpp's choice of each tensor's type in one
    gguf_quants.py          the GGML tensor types written, and NumPy quantizers for Q4_0, Q4_K, Q5_K, Q6_K
    gguf_vocab.py           a tokenizer as a GGUF's tokenizer fields, and the character vocabulary back
    gguf_gpt2.py            a GGUF in the gpt2 layout read back as MiniGPT
"""
