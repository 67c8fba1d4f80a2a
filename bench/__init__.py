"""Benchmarks (`make bench`): figures, never pass/fail assertions."""
