"""docs/check_examples.py, which `make docs-check` (part of `make test`) runs: it finds every
Python example of a page, with the context or the skip an HTML comment gives it, and reports
what mypy --strict refuses at the page's own line."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_examples", ROOT / "docs" / "check_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_examples"] = module  # dataclasses resolve the module's annotations through it
    spec.loader.exec_module(module)
    return module


PAGE = '''# A page

```python
from jobdesk import BaseProcessor, Job, ProcessorResult

class Fetch(BaseProcessor):
    def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({})
```

```python
from jobdesk import ProcessorResult, SyncJob, SyncProcessor

class Fetch(SyncProcessor):
    def process(self, job: SyncJob) -> ProcessorResult:
        job.progress(0.5)
        return ProcessorResult({"step": job.step("one", len, "abc")})
```

=== "Python"

    <!-- mypy
    from jobdesk import JobClient
    async def example(jobs: JobClient) -> None:
    -->
    ```python
    job_id = await jobs.enqueue("echo", {})
    ```

<!-- mypy: skip (needs a library that is not installed) -->
```python
import not_installed_anywhere
```

```python
count: int = "three"
```
'''


def test_the_examples_of_a_page_are_found_with_their_comments(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    found = _checker().examples(page)
    assert [e.line for e in found] == [4, 12, 27, 32, 36]
    assert found[2].context.startswith("from jobdesk import JobClient\n")
    assert found[2].module().endswith("async def example(jobs: JobClient) -> None:\n"
                                      "    job_id = await jobs.enqueue(\"echo\", {})\n")
    assert [e.skipped for e in found] == [None, None, None, "needs a library that is not installed", None]


def test_mypy_refusals_are_reported_at_the_pages_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    checker = _checker()
    complaints = checker.check(checker.examples(page), ROOT / ".mypy_cache" / "docs-examples-test")
    # A plain def process on BaseProcessor is an [override] error; on SyncProcessor it passes.
    assert any(c.startswith(f"{page}:7: error: Return type \"ProcessorResult\" of \"process\" incompatible")
               and c.endswith("[override]") for c in complaints), complaints
    assert any(c.startswith(f"{page}:36: error: Incompatible types in assignment") for c in complaints), complaints
    assert {c.split(":")[1] for c in complaints if ": error:" in c} == {"7", "36"}, complaints
