"""Benchmarks: synthetic palaces and the measurements `palace bench` reports."""
