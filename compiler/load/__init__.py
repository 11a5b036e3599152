"""Stage 1, load: fleet directory -> YAML documents that remember the line of every field."""
