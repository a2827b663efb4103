"""Fine-tuning a trained policy from a person's ratings with CPL: rating runs (clips of a
policy at several noise levels), then the CPL loop."""
