"""Code generation: transformed frame code and resume functions (with the `bytecode` package)."""
