"""Type-check every Python example of the documentation with `mypy --strict`, as a user's code.

    python docs/check_examples.py          # exit 1, naming each page and line, if mypy refuses one

Each ```python block of docs/*.md and README.md is a module of its own, checked against this
checkout's jobdesk (read as an installed package would be: its own code is not checked here).
An HTML comment right before a block, which the site does not show, may say two things:

    <!-- mypy: skip (the reason) -->

leaves the block out (keep these few: an example that needs a library the test environment does
not have). And

    <!-- mypy
    from jobdesk import JobClient
    async def example(jobs: JobClient) -> None:
    -->

gives a fragment the context it is shown in: these lines go first, and when the last of them ends
with `:` the block is indented under it (a fragment with `await`, or a `return` in a processor).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(\s*)```python\s*$")
SKIP = re.compile(r"^\s*<!-- mypy: skip \((.+)\) -->\s*$")
# jobdesk read as an installed package: its own errors are make lint's business, not the examples'.
# docs/examples holds modules that a page shows whole, and that others import (fastapi_app).
CONFIG = f"""[mypy]
strict = True
mypy_path = {ROOT / "docs" / "examples"}

[mypy-jobdesk.*]
follow_imports = silent
"""


@dataclass
class Example:
    page: Path
    line: int  # of the first line of code, from 1
    code: str
    context: str = ""  # the lines of a `<!-- mypy ... -->` comment
    skipped: str | None = None  # the reason given

    def module(self) -> str:
        """The module mypy checks: the context, then the code (indented under a context that ends with `:`)."""
        if not self.context:
            return self.code
        last = self.context.rstrip().splitlines()[-1]
        indent = len(last) - len(last.lstrip()) + 4 if last.rstrip().endswith(":") else 0
        return self.context + textwrap.indent(self.code, " " * indent, lambda line: True)

    def where(self, module_line: int) -> str:
        """`docs/page.md:LINE`: where a line of the module is on its page."""
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line + module_line - 1 - self.context.count(chr(10))}"


def examples(page: Path) -> list[Example]:
    """The ```python blocks of a page, each with the comment that comes right before it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        code = textwrap.dedent("\n".join(lines[i + 1:end])) + "\n"
        example = Example(page, i + 2, code)
        _read_comment(lines, i, example)
        found.append(example)
        i = end + 1
    return found


def _read_comment(lines: list[str], fence: int, example: Example) -> None:
    """The `<!-- mypy ... -->` comment that ends on the line before the fence (blank lines between allowed)."""
    k = fence - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    if k < 0 or not lines[k].strip().endswith("-->"):
        return
    skipped = SKIP.match(lines[k])
    if skipped:
        example.skipped = skipped.group(1)
        return
    start = k
    while start >= 0 and not lines[start].strip().startswith("<!--"):
        start -= 1
    if start >= 0 and lines[start].strip() == "<!-- mypy":
        example.context = textwrap.dedent("\n".join(lines[start + 1:k])) + "\n"


def pages(root: Path = ROOT) -> list[Path]:
    return [*sorted((root / "docs").glob("*.md")), root / "README.md"]


def check(found: list[Example], cache_dir: Path | None = None) -> list[str]:
    """mypy's complaints about these examples, each as `page:line: error: ...`; none when all pass."""
    complaints = []
    checked = []
    for example in (e for e in found if e.skipped is None):
        try:  # mypy stops at the first syntax error of any module: those are said here, the others checked
            compile(example.module(), "example", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError as exc:
            complaints.append(f"{example.where(exc.lineno or 1)}: error: {exc.msg}  [syntax]")
        else:
            checked.append(example)
    if not checked:
        return complaints
    with tempfile.TemporaryDirectory(prefix="jobdesk-examples-") as tmp:
        folder = Path(tmp)
        names = {}
        for n, example in enumerate(checked):
            name = f"example_{n}_{re.sub(r'[^a-z0-9]', '_', example.page.stem.lower())}.py"
            (folder / name).write_text(example.module(), encoding="utf-8")
            names[name] = example
        (folder / "mypy.ini").write_text(CONFIG)
        argv = [sys.executable, "-m", "mypy", "--config-file", str(folder / "mypy.ini"), "--no-error-summary",
                "--cache-dir", str(cache_dir or folder / ".cache"), *(str(folder / name) for name in sorted(names))]
        # From the checkout's root, where the `jobdesk` it documents is found.
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    for line in (done.stdout + done.stderr).splitlines():
        where = re.match(r"^(?:.*[/\\])?(example_\d+_\w+\.py):(\d+): (.*)$", line)
        if where is None:
            complaints.append(line)
            continue
        complaints.append(f"{names[where.group(1)].where(int(where.group(2)))}: {where.group(3)}")
    if done.returncode != 0 and not complaints:
        complaints.append(f"mypy exited with {done.returncode}")
    return complaints


def main() -> int:
    found = [e for page in pages() for e in examples(page)]
    complaints = check(found, ROOT / ".mypy_cache" / "docs-examples")
    for line in complaints:
        print(line, file=sys.stderr)
    if complaints:
        return 1
    skipped = sum(e.skipped is not None for e in found)
    print(f"{len(found) - skipped} Python examples type-check ({skipped} skipped, each with its reason)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
