"""Helpers for tests and benchmarks: tiny random checkpoints built at run time."""
