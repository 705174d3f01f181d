"""Where processors come from: built-ins, the entry-point group, named modules, JOB_PROCESSOR_PATH."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from jobdesk.core.errors import ProcessorLoadError
from jobdesk.processors.builtin import EchoProcessor
from jobdesk.runtime.registry import _lists_plugins, instantiate, load_processor_classes


def write_module(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))


PLUGIN = """
    from jobdesk import BaseProcessor, ProcessorResult

    class Shout(BaseProcessor):
        async def process(self, job):
            return ProcessorResult({"text": job.input_data["text"].upper()})

    PROCESSOR_MAP = {"shout": Shout, "echo": Shout}
"""


@pytest.fixture
def plugin_dir(tmp_path: Path):  # type: ignore[no-untyped-def]
    before = list(sys.path)
    yield tmp_path
    sys.path[:] = before
    for name in [m for m in sys.modules if m.startswith("jd_plugin")]:
        del sys.modules[name]


def test_builtins_are_always_there() -> None:
    classes = load_processor_classes()
    assert {"echo", "sleep", "noop", "video.script", "video.composite"} <= set(classes)
    assert classes["echo"] is EchoProcessor


def test_named_module_on_the_processor_path_overrides(plugin_dir: Path) -> None:
    write_module(plugin_dir, "jd_plugin_a", PLUGIN)
    classes = load_processor_classes(["jd_plugin_a"], [str(plugin_dir)])
    assert classes["shout"].__name__ == "Shout"
    assert classes["echo"].__name__ == "Shout", "a named module wins over the built-ins"
    made = instantiate(classes)
    assert made["shout"] is made["echo"], "one instance per class"


def test_entry_point_group_is_loaded(plugin_dir: Path) -> None:
    write_module(plugin_dir, "jd_plugin_ep", PLUGIN)
    dist = plugin_dir / "jd_plugin_ep-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: jd-plugin-ep\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[jobdesk.processors]\nshouting = jd_plugin_ep\n")
    sys.path.insert(0, str(plugin_dir))
    assert "shout" in load_processor_classes()


@pytest.mark.parametrize(("text", "plugins"), [
    ("[jobdesk.processors]\nbuiltin = jobdesk.processors.builtin\n", False),
    ("[console_scripts]\njobdesk = x:main\n\n[jobdesk.processors]\nbuiltin = jobdesk.processors.builtin\n\n"
     "[jobdesk.connections]\ndjango = jobdesk.integrations.django\n", False),
    ("[jobdesk.processors]\nbuiltin = jobdesk.processors.builtin\nmine = myapp.processors\n", True),
    ("[jobdesk.processors]\nmine = myapp.processors:MAP [extra]\n", True),
    ("[jobdesk.connections]\nmine = myapp.processors\n", False),
])
def test_which_entry_point_files_send_the_worker_to_the_package_metadata(text: str, plugins: bool) -> None:
    assert _lists_plugins(text) is plugins


@pytest.mark.parametrize(("body", "message"), [
    ("PROCESSOR_MAP = {'x': int}\n", "not a BaseProcessor or SyncProcessor subclass"),
    ("PROCESSOR_MAP = ['x']\n", "has no PROCESSOR_MAP dict"),
    ("raise RuntimeError('half-written module')\n", "failed to load: RuntimeError: half-written module"),
])
def test_bad_modules_are_refused_clearly(plugin_dir: Path, body: str, message: str) -> None:
    write_module(plugin_dir, "jd_plugin_bad", body)
    with pytest.raises(ProcessorLoadError, match=message):
        load_processor_classes(["jd_plugin_bad"], [str(plugin_dir)])


def test_processor_that_cannot_be_instantiated(plugin_dir: Path) -> None:
    write_module(plugin_dir, "jd_plugin_init", """
        from jobdesk import BaseProcessor

        class NeedsArgs(BaseProcessor):
            def __init__(self, url):
                self.url = url

        PROCESSOR_MAP = {"needs": NeedsArgs}
    """)
    with pytest.raises(ProcessorLoadError, match="cannot create processor NeedsArgs"):
        instantiate(load_processor_classes(["jd_plugin_init"], [str(plugin_dir)]))
