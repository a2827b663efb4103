"""Fault injection on the human labelling path (the harness of benchmarks/label_faults.py, with
a few kills): nothing acknowledged is lost, stored twice or put on another pair than the one
shown, and the trainer trains on exactly the stored pairs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import label_faults  # (a benchmark script, found through the path above)


def test_killing_trainer_server_and_renderer_loses_or_misplaces_no_label(tmp_path):
    result = label_faults.run_faults(tmp_path, kills=3, seed=1, log=lambda _: None)
    assert result["trainer"] == 3 and result["server"] == 1 and result["acknowledged"] > 0, result
    assert result["lost"] == result["stored_twice"] == result["on_wrong_pair"] == 0, result
    assert result["trained_on_the_stored_pairs"], result
