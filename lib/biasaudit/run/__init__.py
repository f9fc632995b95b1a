"""A run: its params, pipeline steps, stores, the study's cached results, options and paths."""
