"""Profiler wrappers for scripts that are not pairs (see profile_pytorch.sh and profile_cuda.sh)."""
