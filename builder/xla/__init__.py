"""torch_xla programs: xla-check (host syncs, recompiles, CPU fallbacks) and the lazy-execution smoke."""
