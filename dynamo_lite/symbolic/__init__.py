"""The symbolic bytecode interpreter (translator, inliner, opcode handlers)."""
