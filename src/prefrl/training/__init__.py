"""What every workflow's training loop shares: the run directory and its resume, the
periodic work (logs, evaluations, checkpoints), evaluation episodes, and trained policies loaded
back from their runs (`load_policy`, through the policy kinds the workflows register)."""
