"""BenchMARL / TorchRL multi-agent training and the field's statistics (the ``marl`` extra)."""
