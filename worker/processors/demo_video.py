"""The demo "generate video" pipeline: script -> (voice, image) -> video -> compositing.

`jobdesk demo` enqueues the script stage; the script creates the other stages as next_jobs.
Durations are simulated, a stage fails now and then with a transient error (and is retried),
and the video stage waits for a human to approve the draft before compositing starts.

Input of the script stage (all optional):
  topic           what the video is about
  duration_scale  multiplies every simulated duration (0 for instant stages)
  fail_rate       chance that a voice or image attempt fails transiently (default 0.2)
  approval        false to skip the approval of the video draft
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from pydantic import BaseModel, Field

from worker.core.models import Job, JobCreate, ProcessorResult
from worker.core.processor import BaseProcessor

PIPELINE_NAME = "Generate video"
BASE_SECONDS = {"video.script": 2.0, "video.voice": 4.0, "video.image": 3.0, "video.render": 5.0,
                "video.composite": 3.0}


class StageInput(BaseModel):
    """What every stage reads (the script stage passes it on to the others); all optional."""

    topic: str = Field("a day in the life of a job queue", description="what the video is about")
    duration_scale: float = Field(1.0, ge=0, description="multiplies every simulated duration")
    fail_rate: float = Field(0.2, ge=0, le=1, description="chance that a voice or image attempt fails")
    approval: bool = Field(True, description="false to skip the approval of the video draft")
    name: str | None = Field(None, description="the pipeline's name")
    stage: str | None = Field(None, description="set by the script stage")


class TransientStageError(RuntimeError):
    """A simulated hiccup (a rate limit, a flaky upstream); retrying fixes it."""


def _options(job: Job) -> dict[str, Any]:
    # The worker has checked input_data against StageInput already; this fills in the defaults.
    return StageInput.model_validate(job.input_data).model_dump(include={"topic", "duration_scale", "fail_rate",
                                                                         "approval"})


async def _work(job: Job, options: dict[str, Any]) -> float:
    jitter = random.uniform(0.6, 1.4)  # noqa: S311 - simulated work
    seconds = BASE_SECONDS[job.type] * options["duration_scale"] * jitter
    await asyncio.sleep(seconds)
    return round(seconds, 3)


class ScriptStage(BaseProcessor):
    """Writes the script, then lays out the rest of the pipeline."""

    input_model = StageInput

    async def process(self, job: Job) -> ProcessorResult:
        options = _options(job)
        took = await _work(job, options)
        shared = {**options, "name": f"{PIPELINE_NAME}: {options['topic']}"}
        voice = JobCreate("video.voice", {**shared, "stage": "voice"})
        image = JobCreate("video.image", {**shared, "stage": "image"})
        render = JobCreate("video.render", {**shared, "stage": "render"},
                           dependent_on_jobs=[voice.id, image.id])
        composite = JobCreate("video.composite", {**shared, "stage": "composite"},
                              dependent_on_jobs=[render.id])
        script = [f"Scene {n}: {options['topic']}, part {n}" for n in range(1, 4)]
        return ProcessorResult({"script": script, "seconds": took},
                               next_jobs=[voice, image, render, composite])


class FlakyStage(BaseProcessor):
    """Voice and image: sometimes fail transiently, which the retry rules absorb."""

    input_model = StageInput

    async def process(self, job: Job) -> ProcessorResult:
        options = _options(job)
        took = await _work(job, options)
        if random.random() < options["fail_rate"]:  # noqa: S311 - simulated failure
            raise TransientStageError(f"{job.type} service is busy, try again (attempt {job.attempt})")
        asset = "voice.wav" if job.type == "video.voice" else "frames.png"
        return ProcessorResult({"asset": f"{job.pipeline_id}/{asset}", "seconds": took})


class RenderStage(BaseProcessor):
    """Renders a draft, which a human approves before compositing."""

    input_model = StageInput

    async def process(self, job: Job) -> ProcessorResult:
        options = _options(job)
        took = await _work(job, options)
        return ProcessorResult({"draft": f"{job.pipeline_id}/draft.mp4", "seconds": took},
                               requires_approval=options["approval"])


class CompositeStage(BaseProcessor):
    input_model = StageInput

    async def process(self, job: Job) -> ProcessorResult:
        took = await _work(job, _options(job))
        return ProcessorResult({"video": f"{job.pipeline_id}/final.mp4", "seconds": took})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {
    "video.script": ScriptStage,
    "video.voice": FlakyStage,
    "video.image": FlakyStage,
    "video.render": RenderStage,
    "video.composite": CompositeStage,
}


def demo_pipeline(topic: str | None = None, **options: float | bool) -> JobCreate:
    """The first job of a demo pipeline; its pipeline id is the job's own id."""
    data: dict[str, Any] = {"name": f"{PIPELINE_NAME}: {topic or 'a day in the life of a job queue'}"}
    if topic:
        data["topic"] = topic
    data.update(options)
    job = JobCreate("video.script", data)
    job.pipeline_id = job.id
    return job
