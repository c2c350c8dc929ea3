"""Character n-gram language models (the baseline MiniGPT must beat) and their honest tuning."""
