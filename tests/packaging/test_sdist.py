"""The source distribution carries the migrations and the console's resources, and the wheel
built from it (as pip builds one from PyPI's sdist) puts them into the packages. Both are built
from a clone whose links are plain files (`git clone -c core.symlinks=false`)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from tests.packaging.source_tree import ROOT, clone_without_links


def test_the_sdist_and_the_wheel_built_from_it_carry_sql_and_resources(tmp_path: Path) -> None:
    source = clone_without_links(tmp_path / "source")
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path), str(source)],
                           capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-2000:]
    migrations = sorted(p.name for p in (ROOT / "sql").glob("[0-9]*.sql"))
    icons = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "resources").rglob("*") if p.is_file())
    assert migrations and icons

    (sdist,) = tmp_path.glob("jobdesk-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {f"sql/{m}" for m in migrations} <= names
    assert set(icons) <= names

    (wheel,) = tmp_path.glob("jobdesk-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        inside = set(whl.namelist())
    assert {f"jobdesk/sql/{m}" for m in migrations} <= inside, "python -m build makes the wheel from the sdist"
    assert {f"jobdesk/console/{i}" for i in icons} <= inside
    assert {n.split("/", 1)[0] for n in inside if not n.startswith("jobdesk-")} == {"jobdesk"}, "one import package"
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in inside)
    # The same modules as the checkout's folders, each once, under the import name.
    modules = {p.relative_to(ROOT / "worker").as_posix() for p in (ROOT / "worker").rglob("*.py")
               if "console" not in p.relative_to(ROOT / "worker").parts[:1]}
    modules |= {f"console/{p.relative_to(ROOT / 'desktop').as_posix()}" for p in (ROOT / "desktop").rglob("*.py")}
    assert {n.removeprefix("jobdesk/") for n in inside if n.endswith(".py")} == modules
    assert {n.split("/", 1)[0] for n in names if n.endswith(".py")} >= {"worker", "desktop"}
