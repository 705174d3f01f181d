"""`ModelLater`: a processor's `input_model` named, and imported at its first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel


class ModelLater:
    """A class attribute that stands for the pydantic model `name` of `module`, imported the
    first time it is read (from the class or an instance, as `input_model` is read)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name
        self.model: type[BaseModel] | None = None

    def __get__(self, instance: object, owner: type | None = None) -> type[BaseModel]:
        return self.load()

    def load(self) -> type[BaseModel]:
        if self.model is None:
            self.model = getattr(importlib.import_module(self.module), self.name)  # noqa: TID251 - a module of jobdesk's
        return self.model
