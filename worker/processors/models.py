"""The pydantic models of the built-in processors' inputs.

The processors name them with `ModelLater`, so that loading the built-ins loads no pydantic: a
worker's first claim needs the types it serves, not their models (pydantic and these classes are
30 ms of a worker's start). The first job checked against one imports this module.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EchoInput(BaseModel):
    """Any JSON object."""

    model_config = ConfigDict(extra="allow")


class SleepInput(BaseModel):
    """How long to sleep; other keys (a pipeline's `name`, say) are ignored."""

    # Strict: "5" and true are mistakes, not numbers of seconds.
    seconds: float = Field(1, ge=0, strict=True, description="seconds to sleep")


class NoopInput(BaseModel):
    """Anything; it is not read."""

    model_config = ConfigDict(extra="allow")


class StageInput(BaseModel):
    """What every stage of the demo video pipeline reads (the script stage passes it on to the
    others); all optional."""

    topic: str = Field("a day in the life of a job queue", description="what the video is about")
    duration_scale: float = Field(1.0, ge=0, description="multiplies every simulated duration")
    fail_rate: float = Field(0.2, ge=0, le=1, description="chance that a voice or image attempt fails")
    approval: bool = Field(True, description="false to skip the approval of the video draft")
    name: str | None = Field(None, description="the pipeline's name")
    stage: str | None = Field(None, description="set by the script stage")

