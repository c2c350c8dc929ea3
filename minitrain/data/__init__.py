"""Data and tokenizers: the Spanish verb-conjugation corpus and its batches (lab 00: conjugator, corpus, character
tokenizer, batcher; lab 06's byte-level BPE), text data as people have it for pretrained bases (records, token
examples, packing, the base's own tokenizer and chat template), and tables (formats, sources, splits,
preprocessing, augmentation). Each module's docstring says what it holds.
"""
