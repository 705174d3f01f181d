"""What a job type's processor says about its input, for the New job dialog (no Qt here).

A processor class may declare `input_model`, a pydantic model of its `input_data`. The dialog
finds the classes as a worker does (built-ins, entry points, `JOB_PROCESSOR_MODULES`), prefills
a skeleton from the model's JSON schema and validates what is typed against the model."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from jobdesk.core.json_value import JsonValue
from jobdesk.core.settings import Settings
from jobdesk.runtime.registry import load_processor_classes


def input_models(settings: Settings) -> dict[str, type[BaseModel]]:
    """Job type -> its processor's input model, for the processors that declare one. Raises
    `ProcessorLoadError` (a JobdeskError) when a processor module cannot be loaded."""
    classes = load_processor_classes(settings.JOB_PROCESSOR_MODULES, settings.JOB_PROCESSOR_PATH)
    found: dict[str, type[BaseModel]] = {}
    for job_type, cls in classes.items():
        model = getattr(cls, "input_model", None)
        if isinstance(model, type) and issubclass(model, BaseModel):
            found[job_type] = model
    return found


def skeleton(model: type[BaseModel]) -> dict[str, Any]:
    """An input to start from: every field, with its default or an empty value of its type."""
    schema = model.model_json_schema()
    return _object(schema, schema.get("$defs", {}))


def _object(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    return {name: prop["default"] if "default" in prop else _example(prop, defs)
            for name, prop in schema.get("properties", {}).items()}


def _example(prop: dict[str, Any], defs: dict[str, Any]) -> JsonValue:
    if "$ref" in prop:
        prop = defs.get(prop["$ref"].rsplit("/", 1)[-1], {})
    if "enum" in prop and prop["enum"]:
        return prop["enum"][0]
    if "const" in prop:
        return prop["const"]
    options = prop.get("anyOf") or prop.get("oneOf")
    if options:
        concrete = [o for o in options if o.get("type") != "null"]
        return _example(concrete[0], defs) if concrete else None
    kind = str(prop.get("type"))
    if kind == "object":
        return _object(prop, defs)
    empty: dict[str, JsonValue] = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "null": None}
    return empty.get(kind, None)


def check_input(text: str, model: type[BaseModel] | None) -> tuple[dict[str, Any] | None, list[str]]:
    """The input typed so far: the object, or None and what is wrong (one line per problem)."""
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        return None, [f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"]
    if not isinstance(value, dict):
        return None, ["the input must be a JSON object ({…})"]
    if model is not None:
        try:
            model.model_validate(value)
        except ValidationError as exc:
            return None, [f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()]
    return value, []
