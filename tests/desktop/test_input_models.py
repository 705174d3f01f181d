"""The New job dialog's input checks, without Qt: skeletons from a model's schema, validation."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

from jobdesk.console.jobs.input_models import check_input, input_models, skeleton
from jobdesk.core.settings import load_settings


class Size(Enum):
    SMALL = "small"
    LARGE = "large"


class Box(BaseModel):
    w: int
    h: float = 1.5


class Everything(BaseModel):
    name: str
    count: int = 3
    tags: list[str]
    size: Size
    box: Box
    note: str | None = None
    ratio: float | None
    on: bool = Field(default=True)


def test_skeleton_has_every_field_with_its_default_or_an_empty_value() -> None:
    assert skeleton(Everything) == {"name": "", "count": 3, "tags": [], "size": "small", "box": {"w": 0, "h": 1.5},
                                    "note": None, "ratio": 0, "on": True}


def test_check_input_names_the_json_error_and_the_field_errors() -> None:
    assert check_input('{"a": 1,}', None) == (None, ["invalid JSON at line 1, column 9: Expecting property name "
                                                     "enclosed in double quotes"])
    assert check_input("[1]", None) == (None, ["the input must be a JSON object ({…})"])
    assert check_input("", None) == ({}, [])
    value, problems = check_input('{"name": "x", "tags": [], "size": "huge", "box": {"w": "wide"}, "ratio": 1}',
                                  Everything)
    assert value is None
    assert problems == ["size: Input should be 'small' or 'large'",
                        "box.w: Input should be a valid integer, unable to parse string as an integer"]
    assert check_input('{"name": "x", "tags": [], "size": "small", "box": {"w": 2}, "ratio": 1}', Everything)[1] == []


def test_input_models_come_from_the_processors_a_worker_would_load() -> None:
    models = input_models(load_settings(JOB_PROCESSOR_MODULES="tests.desktop.input_model_processors"))
    assert models["thumb.make"].__name__ == "ThumbnailInput"
    assert models["echo"].__name__ == "EchoInput"  # the built-ins declare theirs too
