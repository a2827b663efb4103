"""The documentation: the site builds strictly (a broken link, a missing page or a docstring
that does not render fails) with its generated pages, the CLI reference and the benchmarks
page; the Python reference has every public name and every config field, each described (on the
site and in `help()`); no markdown renders as stray backticks; the guides stay guides."""

import dataclasses
import html.parser
import inspect
import pydoc
import re
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path

import griffe
import pytest

import prefrl

ROOT = Path(__file__).resolve().parent.parent
MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site as `make docs` builds it, generated pages included."""
    for script in ("gen_cli.py", "gen_benchmarks.py", "gen_reproductions.py"):
        subprocess.run([sys.executable, str(ROOT / "docs" / script)], check=True, cwd=ROOT)
    out_dir = tmp_path_factory.mktemp("site")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    out = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(out_dir)],
                         cwd=ROOT, capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    return out_dir


def test_the_site_builds_strictly_with_its_generated_pages(site):
    cli = (ROOT / "docs" / "cli.md").read_text()
    assert "## prefrl train" in cli and "--schedule.budget" in cli and "(default: 1000)" in cli
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    assert "benchmarks/label_faults.py" in bench
    page = (site / "python" / "index.html").read_text()
    assert "PreferenceLearner" in page and "prefer_pendulum" not in page.split("<code")[0]
    assert (site / "api" / "index.html").read_text().count("PreferenceLearner") > 2


# ------------------------------------------------------------------ guides and results pages


def test_guides_stay_guides():
    """A guide says what the workflow is for, its command, its outputs and flags; measurement
    history goes to the dated notes (docs/notes/), so no guide grows past 300 lines."""
    long = {path.name: n for path in sorted((ROOT / "docs" / "guides").glob("*.md"))
            if (n := len(path.read_text().splitlines())) > 300}  # fmt: skip
    assert not long, f"guides over 300 lines: {long}"


def test_the_benchmarks_page_starts_with_the_headline_table_then_a_section_per_benchmark():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_benchmarks
    finally:
        sys.path.remove(str(ROOT / "docs"))
    assert gen_benchmarks.unclaimed() == [], "results files no benchmark section shows"
    page = gen_benchmarks.render()
    readme = (ROOT / "README.md").read_text().split("## Headline results", 1)[1]
    table = [line for line in readme.split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    headings = re.findall(r"^## (.+)$", page, re.MULTILINE)
    assert headings[0] == "Headline results" and "\n".join(table) in page
    assert headings[1:] == [bench.title for bench in gen_benchmarks.BENCHMARKS]
    for bench in gen_benchmarks.BENCHMARKS:  # each with its baseline, commands and plots
        part = page.split(f"## {bench.title}\n", 1)[1].split("\n## ", 1)[0]
        assert "**Baseline:**" in part and "```bash\npython benchmarks/" in part, bench.title
        for pattern in bench.plots:
            assert all(
                f"results/{png.name}" in part
                for png in (ROOT / "benchmarks" / "results").glob(pattern)
            ), pattern


def test_the_reproductions_page_shows_one_row_per_result_or_what_is_missing():
    """Each replaced project's results beside prefrl's, each figure from exactly one row of a
    results file (with the command that made it), each missing one saying what is missing."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_reproductions as gen
    finally:
        sys.path.remove(str(ROOT / "docs"))
    assert gen.check() == [], "selections matching several rows"
    page = gen.render()
    assert re.findall(r"^## (.+)$", page, re.MULTILINE) == [p.name for p in gen.PROJECTS]
    shown = 0
    for project in gen.PROJECTS:
        part = page.split(f"## {project.name}\n", 1)[1].split("\n## ", 1)[0]
        for result in project.results:
            line = next(x for x in part.splitlines() if x.startswith(f"| {result.what} |"))
            row = result.ours.row() if result.ours else None
            if row is None:
                assert line.endswith(f"| {result.missing or 'not run'} |"), line
            else:
                shown += 1
                assert result.figure(row) in line, line
                command = result.ours.command(row)  # (a record of several: each command shown)
                for each in re.findall(r"python .+?(?= ; | \(|$)", command) or [command]:
                    assert each.strip() in part, each
                if result.baseline and result.baseline.row() is None:  # (judged on nothing)
                    assert "its baseline not run yet" in line, line
                    assert not re.search(r"\bmet\b", line), line
    assert shown >= 8, "the results already measured (PEBBLE, PT, CPL, RFCL, MovingDot)"


# ------------------------------------------------------------------ the Python reference


def public_names() -> dict[str, object]:
    return {name: getattr(prefrl, name) for name in prefrl.__all__ if name != "__version__"}


def path_of(obj) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def dataclasses_within(roots) -> list[type]:
    """The dataclasses `roots`, and every dataclass a field of one of them holds (a config's
    nested configs: `OnlineConfig.sac` is a `SACConfig`, `RLConfig.a2c` an `A2CConfig`)."""
    found: list[type] = []

    def visit(cls: type) -> None:
        if cls in found:
            return
        found.append(cls)
        for field in dataclasses.fields(cls):
            try:  # (a name imported for type checking alone does not resolve: not a config)
                hint = eval(field.type, vars(sys.modules[cls.__module__])) if isinstance(
                    field.type, str) else field.type  # fmt: skip
            except NameError:
                continue
            args = typing.get_args(hint) if typing.get_origin(hint) in (
                typing.Union, types.UnionType) else (hint,)  # fmt: skip
            for arg in args:
                if isinstance(arg, type) and dataclasses.is_dataclass(arg):
                    visit(arg)

    for cls in roots:
        visit(cls)
    return found


def configs() -> list[type]:
    """The public configs (`OnlineConfig`, ...) and the configs their fields hold."""
    return dataclasses_within(
        obj for name, obj in public_names().items() if name.endswith("Config")
    )


def public_dataclasses() -> list[type]:
    """Configs, results (`OnlineResult`, ...), `DemoSet`, `LoadedPolicy`: their fields are part of
    the reference."""
    objects = public_names().values()
    return [*configs(), *(obj for obj in objects if isinstance(obj, type)
                          and dataclasses.is_dataclass(obj) and obj not in configs())]  # fmt: skip


def reference_entries() -> set[str]:
    text = (ROOT / "docs" / "api.md").read_text()
    return set(re.findall(r"^::: ([\w.]+)\s*$", text, re.MULTILINE))


def test_the_reference_has_an_entry_for_every_public_name_and_config():
    entries = reference_entries()
    wanted = {name: path_of(obj) for name, obj in public_names().items()}
    wanted |= {cls.__name__: path_of(cls) for cls in configs()}
    missing = sorted(f"{name} (`::: {path}`)" for name, path in wanted.items()
                     if path not in entries)  # fmt: skip
    assert not missing, f"docs/api.md has no entry for {', '.join(missing)}"


@pytest.fixture(scope="module")
def source():
    """prefrl as the docs site reads it: statically, from the source (griffe, mkdocstrings')."""
    return griffe.load("prefrl", search_paths=[str(ROOT / "src")])


def described(member) -> bool:
    return member.docstring is not None and bool(member.docstring.value.strip())


def test_every_public_name_and_every_config_field_is_described(source):
    """The site lists a class's fields only when they have a description: a field without one
    is silently missing from the reference."""
    missing = [name for name, obj in public_names().items()
               if not described(source[path_of(obj).removeprefix("prefrl.")])]  # fmt: skip
    for cls in public_dataclasses():
        members = source[path_of(cls).removeprefix("prefrl.")].all_members
        missing += [f"{cls.__name__}.{field.name}" for field in dataclasses.fields(cls)
                    if field.name not in members or not described(members[field.name])]  # fmt: skip
    assert not missing, f"no docstring: {', '.join(missing)}"


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("cls", configs(), ids=lambda cls: cls.__name__)
def test_help_shows_every_field_with_its_type_default_and_description(cls, source):
    members = source[path_of(cls).removeprefix("prefrl.")].all_members
    shown = flat(re.sub(r"(?m)^ \|", "", pydoc.render_doc(cls, renderer=pydoc.plaintext)))
    parameters = inspect.signature(cls).parameters
    for field in dataclasses.fields(cls):
        if field.init:
            assert flat(str(parameters[field.name])) in shown, field.name  # (type and default)
            description = flat(members[field.name].docstring.value)
            assert f"{field.name} (" in shown and description in shown, (field.name, description)


def test_the_reference_page_shows_every_public_name_and_config_field(site):
    page = (site / "api" / "index.html").read_text()
    ids = set(re.findall(r'id="(prefrl\.[\w.]+)"', page))
    wanted = [path_of(obj) for obj in public_names().values()]
    wanted += [f"{path_of(cls)}.{field.name}" for cls in public_dataclasses()
               for field in dataclasses.fields(cls)]  # fmt: skip
    missing = [path for path in wanted if path not in ids]
    assert not missing, f"not on the reference page: {', '.join(missing)}"


# ------------------------------------------------------------------ markdown that renders wrong


FENCE = re.compile(r"^( *)(`{3,}|~{3,})(.*)$")


def stray_backticks(lines: list[tuple[int, str]]) -> list[str]:
    """Backtick strings with no partner of the same length in one paragraph (or table row): the
    site shows them as backticks instead of opening code."""
    if not lines:
        return []
    text = re.sub(r"\\`", "", " ".join(line for _, line in lines))
    runs = [(m.start(), len(m.group())) for m in re.finditer(r"`+", text)]
    out, i = [], 0
    while i < len(runs):
        end = next((k for k in range(i + 1, len(runs)) if runs[k][1] == runs[i][1]), None)
        if end is None:
            at = runs[i][0]
            out.append(f"line {lines[0][0]}: a stray backtick: {text[max(0, at - 30) : at + 30]!r}")
            i += 1
        else:
            i = end + 1
    return out


def markdown_problems(text: str) -> list[str]:
    """Unclosed code fences, text after a closing fence (which leaves the fence open to the end
    of the page), backticks in a fence's info string, and stray backticks."""
    problems: list[str] = []
    fence: tuple[str, str, int] | None = None  # (indent, marker, line)
    paragraph: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), 1):
        match = FENCE.match(line)
        if fence is not None:
            same = match is not None and match.group(2)[0] == fence[1][0] and len(
                match.group(2)) >= len(fence[1])  # fmt: skip
            if same and not match.group(3).strip():
                fence = None
            elif same and len(match.group(1)) <= len(fence[0]):
                problems.append(f"line {number}: text after the closing fence of the code "
                                f"block opened at line {fence[2]}, which stays open")  # fmt: skip
            continue
        if match:
            problems += stray_backticks(paragraph)
            paragraph = []
            if match.group(2)[0] == "`" and "`" in match.group(3):
                problems.append(f"line {number}: a backtick after a code fence's backticks")
            else:
                fence = (match.group(1), match.group(2), number)
        elif not line.strip() or line.lstrip().startswith("|"):
            problems += stray_backticks(paragraph)
            paragraph = []
            if line.lstrip().startswith("|"):
                problems += stray_backticks([(number, line)])
        else:
            paragraph.append((number, line))
    problems += stray_backticks(paragraph)
    if fence is not None:
        problems.append(f"line {fence[2]}: a code block that is never closed")
    return problems


def test_markdown_checker_finds_what_renders_wrong():
    assert markdown_problems("a `b` c\n\n```bash\nls\n```\n\n| `x` | y |\n") == []
    assert markdown_problems("```python\nx = 1\n``` `load_policy()` returns\n")  # python.md's
    assert markdown_problems("```bash\nls\n")
    assert markdown_problems("one `open\nparagraph\n\nnext `closed`\n")
    assert markdown_problems("``` `x`\n")
    assert markdown_problems("uses ``a ` inside`` fine\n") == []


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda path: str(path.relative_to(ROOT)))
def test_markdown_has_no_unclosed_fence_or_stray_backtick(path):
    problems = markdown_problems(path.read_text())
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(problems)


class TextOutsideCode(html.parser.HTMLParser):
    CODE = ("code", "pre", "script", "style", "textarea")

    def __init__(self) -> None:
        super().__init__()
        self.inside, self.backticks = 0, []

    def handle_starttag(self, tag, attrs) -> None:
        self.inside += tag in self.CODE

    def handle_endtag(self, tag) -> None:
        self.inside -= tag in self.CODE

    def handle_data(self, data) -> None:
        if not self.inside and "`" in data:
            self.backticks.append(" ".join(data.split())[:80])


def test_no_page_of_the_site_shows_a_backtick_outside_code(site):
    """What the site renders, docstrings and generated pages included: a backtick in its text
    is markdown that did not render."""
    shown = []
    for page in sorted(site.rglob("*.html")):
        parser = TextOutsideCode()
        parser.feed(page.read_text())
        shown += [f"{page.relative_to(site)}: {text!r}" for text in parser.backticks]
    assert not shown, "\n".join(shown)
