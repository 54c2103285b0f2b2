"""Thin command wrappers: parse, call the core, print JSON, return the exit code."""

import gc

# A command is a short-lived process that allocates much while it starts (modules,
# classes, compiled schemas) and makes few reference cycles: the cyclic collector need
# not run every 700 allocations. Raised, it runs ~70 times less often; reference counting
# still frees everything else at once. (Measured: 2-4 % of the instructions of `lk attempt`
# and `lk workspace`.)
gc.set_threshold(50_000, 20, 20)
