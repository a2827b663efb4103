"""Run directories: layout, atomic checkpoints, metrics (JSONL + TensorBoard), plots."""
