"""Structured events (graph compiled, graph break, fallback, recompile) and their sinks."""
