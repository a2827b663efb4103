"""benchmarks/gpu_rows.py: jobs run in chunks that stop them as Ctrl-C does and resume them, until
each ends by itself; a failing job stops the script naming its log."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_rows

# A job that counts to 40, a count each 50 ms, and on SIGINT saves its count (as a run checkpoints
# on Ctrl-C); started again it goes on from the saved count, noting where each start began.
COUNTER = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    state, starts = Path(sys.argv[1]), Path(sys.argv[2])
    count = int(state.read_text()) if state.exists() else 0
    with starts.open("a") as f:
        f.write(f"{count}\\n")
    def stop(*_):
        state.write_text(str(count))
        sys.exit(130)
    signal.signal(signal.SIGINT, stop)
    while count < 40:
        time.sleep(0.05)
        count += 1
    state.write_text(str(count))
""")


def test_a_job_runs_in_chunks_resuming_until_it_ends_by_itself(tmp_path, capsys):
    script = tmp_path / "counter.py"
    script.write_text(COUNTER)
    count, starts = tmp_path / "count", tmp_path / "starts"
    jobs = {"count": [sys.executable, str(script), str(count), str(starts)]}
    flags = ["--state", str(tmp_path / "state"), "--chunk-minutes", str(1 / 60),
             "--grace-seconds", "10"]  # fmt: skip
    gpu_rows.main([*flags, "--chunks", "1"], jobs)
    first = int(count.read_text())
    assert first < 40, "the first chunk stopped the job part way; it saved its count"
    assert "left: count" in capsys.readouterr().out
    gpu_rows.main(flags, jobs)
    began = [int(n) for n in starts.read_text().split()]
    assert began[:2] == [0, first], "the next chunk resumed from the saved count"
    assert int(count.read_text()) == 40
    assert "all jobs done" in capsys.readouterr().out
    gpu_rows.main(flags, jobs)  # a finished job is not run again
    assert "chunk" not in capsys.readouterr().out
    assert len(starts.read_text().split()) == len(began)


def test_a_failing_job_stops_the_script_naming_its_log(tmp_path):
    jobs = {"bad": [sys.executable, "-c", "raise SystemExit(3)"]}
    with pytest.raises(SystemExit, match="bad failed .exit status 3.: see the end of .*bad.log"):
        gpu_rows.main(["--state", str(tmp_path)], jobs)
