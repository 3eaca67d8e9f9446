"""The training loop, random streams, checkpoints, metrics logs and the ``train`` entry point."""
