"""Benchmarks of loopwire's own overhead (`make bench`)."""
