"""The fault sweep: bad inputs, killed and concurrent runs, out-of-memory, no network; one table."""
