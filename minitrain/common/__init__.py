"""The ground floor every other wing may use: the error type and exit codes, atomic file writes and bounded
reads, the safe YAML reader, problems and their messages, library versions, optional extras, BLAS threads, and
reading a constructor's keys (the registries' helper). Nothing here imports another wing."""
