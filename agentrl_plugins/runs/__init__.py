"""What every framework's run writes: the run folder, per-step metrics, held-out evaluation and the report."""
