"""The ground floor, which imports no other area of the library: where a run's files live (`paths`), the
score store with its lock (`store`), the key-value cache of model outputs (`keyvalue`), the analyses'
options (`options`) and the items contract's columns (`columns`)."""
