"""Stage 6, emit: the compiled object graph -> rendered tree, explain text, schema."""
