"""The test suite itself: a run that leaves a thread behind ends, and fails, instead of hanging."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_a_thread_left_running_after_the_tests_fails_the_run_instead_of_hanging(tmp_path):
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_leak.py").write_text(
        "import threading, time\n\n\n"
        "def test_passes_but_leaves_a_thread():\n"
        "    threading.Thread(target=time.sleep, args=(600,), name='left-behind').start()\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_leak.py"],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PREFRL_TEST_EXIT_WATCHDOG_S": "1"},
    )  # fmt: skip
    assert "1 passed" in done.stdout
    assert done.returncode == 1
    assert "thread 'left-behind' still running after the tests" in done.stderr
