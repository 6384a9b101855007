"""What builds leave behind to look back at: per-step profiles, the run's trace, and the
nightly's plan, state and report."""
