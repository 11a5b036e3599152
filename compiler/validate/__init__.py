"""Stage 2, validate: documents -> typed intents (pydantic) -> cross-object rules -> resolved clusters."""
