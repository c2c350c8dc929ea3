"""The Spanish verb-conjugation corpus and everything that turns it into batches.

    conjugator.py, irregular.py, orthography.py   Spanish conjugation (regular, stem-changing, irregular)
    verbs.py                                      the verb list `data/raw/verbs.tsv`
    split.py                                      held-out verbs: train / dev / val
    corpus.py                                     the JSONL record format, loading and validation
    build.py                                      builds `data/processed/` deterministically
    tokenizer.py                                  character tokenizer (PAD, BOS, EOS, characters)
    batcher.py                                    padded (B, T) batches with attention and loss masks (lab 00)

Text data as people have it, for pretrained bases:

    text_records.py                               text / prompt_completion / chat records from JSONL, JSON,
                                                  tables, documents, folders and hf:// datasets
    text_examples.py                              records to token ids and loss masks (chat turns prefix by prefix)
    packing.py                                    examples to (N, T) rows: packed with segment ids, or padded
    pretrained_tokenizer.py                       a pretrained base's own tokenizer (tokenizers: HF folder, GGUF)
    chat_template.py                              chat templates rendered in jinja2's immutable sandbox
"""
