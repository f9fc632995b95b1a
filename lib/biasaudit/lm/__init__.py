"""Language models: the registry and loading, tiny test models, scoring, the naive reference scorer, generation."""
