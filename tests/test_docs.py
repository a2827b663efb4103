"""The documentation site builds strictly (a broken link, a missing page or a docstring that
does not render fails), with its generated pages: the CLI reference and the benchmarks page."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strictly_with_its_generated_pages(tmp_path):
    for script in ("gen_cli.py", "gen_benchmarks.py"):
        subprocess.run([sys.executable, str(ROOT / "docs" / script)], check=True, cwd=ROOT)
    cli = (ROOT / "docs" / "cli.md").read_text()
    assert "## prefrl train" in cli and "--schedule.budget" in cli and "(default: 1000)" in cli
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    assert "## label_faults" in bench and "benchmarks/label_faults.py" in bench
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    out = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    page = (tmp_path / "site" / "python" / "index.html").read_text()
    assert "PreferenceLearner" in page and "prefer_pendulum" not in page.split("<code")[0]
    assert (tmp_path / "site" / "api" / "index.html").read_text().count("PreferenceLearner") > 2
