"""A run folder and the files in it: its layout and writing rules, the lock that keeps one writer, the readers
that check every file against its schema, the model file format and the checkpoints folder."""
