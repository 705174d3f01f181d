"""SyncJobClient's methods are made at import time from JobClient's; for type checkers each is
declared in the class as well. These declarations must say what the methods are: the same
arguments as the async method, and its result without `await`."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

from jobdesk.service import sync_client
from jobdesk.service.client import JobClient
from jobdesk.service.sync_client import SyncJobClient


def _declared() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(Path(sync_client.__file__).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SyncJobClient")
    block = next(n for n in cls.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    return {f.name: f for f in block.body if isinstance(f, ast.FunctionDef)}


def _async_def(name: str) -> ast.AsyncFunctionDef:
    node = ast.parse(textwrap.dedent(inspect.getsource(getattr(JobClient, name)))).body[0]
    assert isinstance(node, ast.AsyncFunctionDef), name
    return node


def test_every_method_made_from_jobclient_is_declared_as_it_is() -> None:
    made = {name for name, member in vars(SyncJobClient).items()
            if inspect.isfunction(member) and hasattr(member, "__wrapped__")}  # made by _blocking
    declared = _declared()
    assert len(made) >= 20 and set(declared) == made, set(declared) ^ made
    for name, sync in declared.items():
        twin = _async_def(name)
        assert ast.unparse(sync.args) == ast.unparse(twin.args), name
        assert sync.returns is not None and twin.returns is not None, name
        assert ast.unparse(sync.returns) == ast.unparse(twin.returns), name
