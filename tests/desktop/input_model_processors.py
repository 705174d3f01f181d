"""A processor that declares its input model, for the New job dialog's tests."""

from __future__ import annotations

from pydantic import BaseModel, Field

from jobdesk import BaseProcessor, Job, ProcessorResult


class ThumbnailInput(BaseModel):
    url: str = Field(min_length=1)
    width: int = 128
    crop: bool = False


class Thumbnail(BaseProcessor):
    input_model = ThumbnailInput

    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult(result_data={"thumbnail": job.input_data["url"]})


PROCESSOR_MAP = {"thumb.make": Thumbnail}
