"""Find the processors a worker serves: built-ins, entry points and named modules."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from jobdesk.core.errors import JobdeskError, ProcessorLoadError
from jobdesk.core.processor import PROCESSOR_BASES, AnyProcessor, executor_of
from jobdesk.core.schedules import Schedule

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "jobdesk.processors"
BUILTIN_MODULES = ("jobdesk.processors.builtin", "jobdesk.processors.demo_video")


def _plugin_entry_points() -> list[Any]:
    """The `jobdesk.processors` entry points of the installed distributions but jobdesk's own
    built-ins. `importlib.metadata` reads every distribution's metadata, and importing it
    brings email, zipfile and csv: 12 ms of a worker's start. Most installs have no plugin, so
    the `entry_points.txt` files on the path are read first, as text: only when one lists an
    entry point of the group besides the built-ins (or a zip file is on the path) does
    `importlib.metadata` answer, with its own rules for which copy of a distribution counts."""
    if not _may_list_plugins():
        return []
    from importlib.metadata import entry_points

    return [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.value not in BUILTIN_MODULES]


def _may_list_plugins() -> bool:
    """Whether some distribution on the import path may declare a plugin processor module."""
    for folder in sys.path:
        try:
            found = [e.path for e in os.scandir(folder or ".") if e.name.endswith((".dist-info", ".egg-info"))]
        except OSError:  # a zip file is importlib.metadata's to read; a missing folder has nothing
            if folder and os.path.isfile(folder):
                return True
            continue
        for path in found:
            try:
                with open(os.path.join(path, "entry_points.txt"), encoding="utf-8") as f:
                    if _lists_plugins(f.read()):
                        return True
            except OSError:
                continue
    return False


def _lists_plugins(text: str) -> bool:
    """Whether an `entry_points.txt` names a `jobdesk.processors` entry point that is not a built-in."""
    header = f"[{ENTRY_POINT_GROUP}]"
    if header not in text:
        return False
    section = text.split(header, 1)[1].split("\n[", 1)[0]
    values = [line.partition("=")[2].strip() for line in section.splitlines() if "=" in line]
    return any(value not in BUILTIN_MODULES for value in values)


def _map_of(module: ModuleType, origin: str) -> dict[str, type[AnyProcessor]]:
    mapping = getattr(module, "PROCESSOR_MAP", None)
    if not isinstance(mapping, dict):
        raise ProcessorLoadError(f"{origin} has no PROCESSOR_MAP dict")
    for job_type, cls in mapping.items():
        if not isinstance(job_type, str) or not job_type:
            raise ProcessorLoadError(f"{origin}: PROCESSOR_MAP keys must be job type names, got {job_type!r}")
        if not (isinstance(cls, type) and issubclass(cls, PROCESSOR_BASES)):
            raise ProcessorLoadError(f"{origin}: PROCESSOR_MAP[{job_type!r}] is not a BaseProcessor or SyncProcessor "
                                     "subclass")
    return dict(mapping)


def _import(name: str, origin: str) -> ModuleType:
    try:
        return importlib.import_module(name)  # noqa: TID251 - the user's processor module
    except ImportError as exc:
        raise ProcessorLoadError(f"cannot import processor module {name!r} ({origin}): {exc}"
                                 f"{_module_hint(name)}") from exc
    except Exception as exc:
        raise ProcessorLoadError(f"processor module {name!r} ({origin}) failed to load: "
                                 f"{type(exc).__name__}: {exc}") from exc


def _module_hint(name: str) -> str:
    """For a file's name or path given where a module's name belongs (`myprocs.py`,
    `app/procs.py`): the module's name to give instead."""
    path = name.replace("\\", "/").removeprefix("./")
    if not (path.endswith(".py") or "/" in path):
        return ""
    module = path.removesuffix(".py").strip("/").replace("/", ".")
    return f"; give the module's name, without .py: {module}"


def load_processor_classes(modules: Iterable[str] = (), paths: Iterable[str] = (),
                           *, builtins: bool = True) -> dict[str, type[AnyProcessor]]:
    """Merge PROCESSOR_MAPs: built-ins, then entry points, then the named modules (last wins)."""
    _on_import_path(paths)
    found: dict[str, type[AnyProcessor]] = {}
    if builtins:
        for name in BUILTIN_MODULES:
            found.update(_map_of(_import(name, "built-in"), name))
    for ep in _plugin_entry_points():
        try:
            target = ep.load()
        except Exception as exc:
            raise ProcessorLoadError(f"entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        module = target if isinstance(target, ModuleType) else sys.modules[target.__module__]
        found.update(_map_of(module, f"entry point {ep.name}"))
    for module, name in _named_modules(modules):
        found.update(_map_of(module, name))
    return found


def _on_import_path(paths: Iterable[str]) -> None:
    """JOB_PROCESSOR_PATH's folders, first on the import path."""
    for folder in paths:
        if folder not in sys.path:
            sys.path.insert(0, folder)


def _named_modules(modules: Iterable[str]) -> list[tuple[ModuleType, str]]:
    """The modules named with --processors, each with its name. `--processors mymodule` finds
    `mymodule.py` in the current folder, as `python -m` would: it goes first on the import path."""
    names = list(modules)
    here = os.getcwd()
    if names and here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    return [(_import(name, "--processors"), name) for name in names]


def instantiate(classes: dict[str, type[AnyProcessor]]) -> dict[str, AnyProcessor]:
    """One instance per class, shared by every type that maps to it."""
    made: dict[type[AnyProcessor], AnyProcessor] = {}
    out = {}
    for job_type, cls in classes.items():
        if cls not in made:
            try:
                executor_of(cls)
            except ValueError as exc:
                raise ProcessorLoadError(f"processor for type {job_type!r}: {exc}") from None
            try:
                made[cls] = cls()
            except Exception as exc:
                raise ProcessorLoadError(f"cannot create processor {cls.__name__} for type {job_type!r}: "
                                         f"{exc}") from exc
        out[job_type] = made[cls]
    return out


def declared_schedules(modules: Iterable[str] = (), paths: Iterable[str] = ()) -> list[tuple[Schedule, str]]:
    """The `SCHEDULES` of the entry-point and named processor modules, each with its module's
    name; a worker starting with those modules upserts them."""
    _on_import_path(paths)
    sources: list[tuple[ModuleType, str]] = []
    for ep in _plugin_entry_points():
        target = ep.load()
        sources.append((target if isinstance(target, ModuleType) else sys.modules[target.__module__], ep.value))
    sources += _named_modules(modules)
    found: list[tuple[Schedule, str]] = []
    for module, origin in sources:
        declared = getattr(module, "SCHEDULES", [])
        if not isinstance(declared, (list, tuple)) or not all(isinstance(s, Schedule) for s in declared):
            raise ProcessorLoadError(f"{origin}: SCHEDULES must be a list of worker.Schedule")
        for schedule in declared:
            try:
                schedule.check()
            except JobdeskError as exc:
                raise ProcessorLoadError(f"{origin}: {exc}") from None
            found.append((schedule, origin))
    return found


def input_schema(processor: type[AnyProcessor] | AnyProcessor) -> dict[str, Any] | None:
    """The JSON schema of a processor's `input_model`, or None when it declares none."""
    model = processor.input_model
    return None if model is None else model.model_json_schema()


def input_schemas(processors: Mapping[str, type[AnyProcessor] | AnyProcessor]) -> dict[str, dict[str, Any] | None]:
    """Per job type, the JSON schema of its input (None: any JSON object), e.g. to prefill a form."""
    return {job_type: input_schema(p) for job_type, p in sorted(processors.items())}
