"""The "Teach it yourself" guide's commands (docs/guides/teach.md), run as written (with a short --steps) on the env
they name: a real Chromium labels the first session through the page the trainer serves, and
the terminal labeller answers through a pseudo-terminal, until the trainer has used the labels.
The commands are read from the guide, so the test follows it when it changes."""

from __future__ import annotations

import os
import pty
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PREFRL_WITH_CTRL_C, free_port, launch_chromium

from prefrl.feedback.store import FeedbackStore, run_uid
from prefrl.rundir.metrics import read_metrics

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "teach.md"
SHORT = ["--steps", "1300", "--no-progress", "--poll-seconds", "0.2"]
FIRST_SESSION = 20  # the quickstart preset's session size


def section_commands(title: str = "# Teach it yourself") -> list[str]:
    """The `prefrl ...` lines of the section's bash blocks, without their comments."""
    text = GUIDE.read_text()
    start = text.index(title)
    body = text[start : text.find("\n## ", start + len(title))]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", body, re.DOTALL):
        lines += [x.split("  #")[0].strip() for x in block.splitlines()]
    return [x for x in lines if x.startswith("prefrl ")]


def readme_command(command: str, *flags: str, without: tuple[str, ...] = ()) -> list[str]:
    """The one guide command `prefrl COMMAND` holding `flags` and none of `without`, as
    arguments after `prefrl`."""
    found = [
        args
        for args in map(shlex.split, section_commands())
        if args[1] == command and all(f in args for f in flags)
        and not any(w in args for w in without)
    ]  # fmt: skip
    assert len(found) == 1, f"the Teach-it-yourself guide has {found} for {command}"
    return found[0][1:]


def prefrl(args: list[str], **kw) -> subprocess.Popen:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.Popen([sys.executable, "-m", "prefrl", *args], env=env, **kw)


def start_trainer(args: list[str], tmp_path: Path, extra: list[str]) -> subprocess.Popen:
    log = open(tmp_path / "trainer.log", "wb")  # noqa: SIM115 (the child writes it)
    return prefrl([*args, *SHORT, "--runs-dir", str(tmp_path), "--name", "run", *extra],
                  stdout=log, stderr=subprocess.STDOUT)  # fmt: skip


def trainer_output(tmp_path: Path) -> str:
    return (tmp_path / "trainer.log").read_text(errors="replace")


def finish(trainer: subprocess.Popen, tmp_path: Path, source: str) -> None:
    """The trainer trains on the first session's labels to its last step and ends well."""
    try:  # (well inside pytest's 600 s, so that a stuck trainer shows its output)
        code = trainer.wait(timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the trainer did not end within 240 s:\n{trainer_output(tmp_path)}")
    else:
        assert code == 0, trainer_output(tmp_path)
    finally:
        if trainer.poll() is None:
            trainer.kill()
    run = tmp_path / "run"
    fits = [r for r in read_metrics(run) if "feedback/labels" in r]
    assert fits and fits[0]["step"] == 1000 and fits[0]["feedback/labels"] == FIRST_SESSION
    with FeedbackStore(run, create=False) as store:
        labels = store.labels(store.run_id(run_uid(run)))
    assert len(labels) >= FIRST_SESSION and {x.source for x in labels} == {source}
    out = trainer_output(tmp_path)
    assert "Waiting for your first 20 labels" in out and "First labels in" in out


def test_teach_it_in_the_browser_as_the_readme_says(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    port = free_port()
    trainer = start_trainer(
        readme_command("train", "--teacher", "web", without=("--store",)),
        tmp_path,
        ["--web-port", str(port)],
    )
    try:
        with sync_api.sync_playwright() as pw:
            browser = launch_chromium(pw)
            page = browser.new_page()
            deadline = time.time() + 300
            while True:  # the trainer starts the server; it takes a while on a loaded machine
                assert trainer.poll() is None, trainer_output(tmp_path)
                try:
                    page.goto(f"http://127.0.0.1:{port}/compare")
                    break
                except sync_api.Error:
                    assert time.time() < deadline, "the labelling page never came up"
                    time.sleep(1)
            last = -1
            for i in range(FIRST_SESSION):
                page.wait_for_function(
                    f"window.prefrlPair != null && window.prefrlPair !== {last}", timeout=300_000
                )
                status = page.locator("#status").text_content()
                assert "making them" not in status and "Pairs left to label" in status
                last = page.evaluate("window.prefrlPair")
                page.keyboard.press("ArrowLeft" if i % 2 else "ArrowRight")
            # The last answer is on its way when the key is pressed: closing the browser then
            # could drop it (unacknowledged, so rightly not stored) and leave the trainer waiting.
            page.wait_for_function(
                f"/Labels given: {FIRST_SESSION}\\b/.test(document.getElementById('status')"
                ".textContent)",
                timeout=120_000,
            )
            browser.close()
        finish(trainer, tmp_path, "web")
    finally:
        if trainer.poll() is None:
            trainer.kill()


def label_through_a_terminal(args: list[str], answers: int, timeout: float = 600) -> str:
    """Run `prefrl label ...` on a pseudo-terminal; answer L or R to `answers` pairs, then quit:
    Q at the next prompt, or Ctrl-C while it waits for a pair."""
    master, slave = pty.openpty()
    labeller = subprocess.Popen([*PREFRL_WITH_CTRL_C, *args], env={**os.environ, "JAX_PLATFORMS": "cpu"},
                                stdin=slave, stdout=slave, stderr=slave)  # fmt: skip
    os.close(slave)
    screen, given = b"", 0
    deadline = time.time() + timeout
    try:
        while labeller.poll() is None and time.time() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    screen += os.read(master, 65536)
                except OSError:  # the labeller closed the terminal
                    break
            if screen.count(b"better? [L]eft") > given:
                os.write(master, b"q\n" if given == answers else (b"l\n", b"r\n")[given % 2])
                given += 1
            elif (  # every answer saved, then the labeller waits: Ctrl-C (a wait shown before
                # the last pair is no cue: the last answer may not be saved yet)
                given == answers and screen.count(b"saved:") == answers
                and b"Waiting (Ctrl-C" in screen.rsplit(b"saved:", 1)[-1]
            ):  # fmt: skip
                labeller.send_signal(signal.SIGINT)
                given += 1
        assert time.time() < deadline, f"timed out: {screen.decode(errors='replace')}"
        assert labeller.wait(timeout=60) == 0, screen.decode(errors="replace")
    finally:
        if labeller.poll() is None:
            labeller.kill()
        os.close(master)
    assert given == answers + 1, screen.decode(errors="replace")
    return screen.decode(errors="replace")


@pytest.mark.timeout(1800)  # (each wait below has its own deadline, which shows the screen)
def test_teach_it_in_the_terminal_as_the_readme_says(tmp_path):
    trainer = start_trainer(readme_command("train", "--teacher", "terminal"), tmp_path, [])
    run = tmp_path / "run"
    try:
        deadline = time.time() + 300
        while not (run / "feedback.db").exists():
            assert trainer.poll() is None and time.time() < deadline, trainer_output(tmp_path)
            time.sleep(0.5)

        def label(*flags, without=()):
            args = readme_command("label", *flags, without=without)
            return [str(run) if a == "runs/<run>" else a for a in args]

        plain = label_through_a_terminal(label(without=("--side-by-side",)), FIRST_SESSION // 2)
        assert "L: " in plain and "saved: left" in plain and "pairs left:" in plain
        side = label_through_a_terminal(label("--side-by-side"), FIRST_SESSION // 2)
        assert "saved: right" in side
        finish(trainer, tmp_path, "terminal")
    finally:
        if trainer.poll() is None:
            trainer.kill()


def run_readme(args: list[str], places: dict[str, str], extra=(), timeout: float = 600) -> str:
    """Run a guide command with its placeholders filled in (and `extra` flags); returns its
    output, asserting that it succeeded."""
    args = [places.get(a, a) for a in args]
    out = prefrl([*args, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text, _ = out.communicate(timeout=timeout)
    assert out.returncode == 0, text
    return text


def serving(args: list[str], places: dict[str, str], check) -> None:
    """Start a guide `prefrl serve ...` command on a free port, `check(base_url)`, stop it."""
    port = free_port()
    args = [places.get(a, a) for a in args]
    server = prefrl([*args, "--port", str(port)], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)  # fmt: skip
    import httpx2

    try:
        deadline = time.time() + 180
        while True:
            assert server.poll() is None, f"`prefrl {shlex.join(args)}` ended early"
            try:
                check(httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=10))
                return
            except httpx2.TransportError:
                assert time.time() < deadline, f"`prefrl {shlex.join(args)}` never served"
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_the_other_commands_of_the_section_run_as_written(tmp_path, postgres_server):
    """Serving a finished run (local, exposed, side by side), annotators' links, sharing labels
    between runs, and a run on a PostgreSQL store: each guide line as written."""
    short = ["--steps", "1100", "--no-progress", "--runs-dir", str(tmp_path)]
    # The run whose labels are served and shared: the quickstart, scripted, cut short.
    run_readme(["train", "--preset", "quickstart"], {}, [*short, "--name", "run"])
    places = {"runs/<run>": str(tmp_path / "run"), "runs/<other-run>": str(tmp_path / "other"),
              "labels.json": str(tmp_path / "labels.json")}  # fmt: skip

    def page_and_status(client):
        assert client.get("/compare").status_code == 200
        assert client.get("/api/status").json()["labels"] == FIRST_SESSION

    serving(readme_command("serve", without=("--host", "--side-by-side")), places,
            page_and_status)  # fmt: skip
    serving(readme_command("serve", "--side-by-side"), places, page_and_status)

    def needs_a_token(client):
        assert client.get("/api/next").status_code == 401

    serving(readme_command("serve", "--host", "0.0.0.0", without=("--workers",)), places,
            needs_a_token)  # fmt: skip
    out = run_readme(readme_command("annotators", "add", without=("bob",)), places)
    assert out.startswith("alice: http://myhost:8000/compare?token=")
    out = run_readme(readme_command("labels", "export"), places)
    assert f"{FIRST_SESSION} labels of run" in out and (tmp_path / "labels.json").is_file()
    run_readme(["train", "--preset", "quickstart"], {}, [*short, "--name", "other"])
    out = run_readme(readme_command("labels", "import"), places)
    assert f"{FIRST_SESSION} labels imported into other" in out
    out = run_readme(readme_command("train", "--load-labels"), places,
                     [*short, "--name", "loaded"])  # fmt: skip
    assert f"loaded {FIRST_SESSION} labels from" in out
    # `prefrl train ... --store postgresql://...`: the "..." is the rest of a train command.
    store = readme_command("train", "--store", without=("--teacher",))
    assert store[1] == "..." and store[3].startswith("postgresql://")
    run_readme(["train", "--preset", "quickstart", "--store", postgres_server()], {},
               [*short, "--name", "on-postgres"])  # fmt: skip
    assert not (tmp_path / "on-postgres" / "feedback.db").exists()  # its labels went to PostgreSQL
