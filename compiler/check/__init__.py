"""Stage 5, check: emitted objects validated the way the API server and the drivers would."""
