"""The ground floor every other wing may use: the error types and exit codes (errors.py), atomic file writes and
bounded reads (io.py), figures written as PNGs (figures.py), the course's files and recorded paths (paths.py),
strict pydantic bases (strict.py), library versions, optional extras, BLAS threads (runtime.py), and reading a
constructor's keys (registry.py, the registries' helper). Nothing here imports another wing."""
