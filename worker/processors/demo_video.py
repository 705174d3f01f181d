"""The demo "generate video" pipeline: script -> (voice, image) -> video -> compositing.

`jobdesk demo` enqueues the script stage; the script creates the other stages as next_jobs.
Durations are simulated, a stage fails now and then with a transient error (and is retried),
and the video stage waits for a human to approve the draft before compositing starts.

The video stage is a durable processor (docs/durable.md): it generates the draft with a fake paid
API in a step, so a rerun never pays twice; sleeps a moment, as the API's rate limit asks; uploads
the draft in a second step; and waits, with its slot free, for the event `upload-done:<job id>`,
which the fake upload service emits a few seconds later, as a real one would through
`POST /api/events` (an operator can emit it by hand too: `jobdesk event emit upload-done:<job id>`).

Input of the script stage (all optional):
  topic           what the video is about
  duration_scale  multiplies every simulated duration (0 for instant stages)
  fail_rate       chance that a voice or image attempt fails transiently (default 0.2)
  approval        false to skip the approval of the video draft
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, cast

from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.processors.model_later import ModelLater

log = logging.getLogger(__name__)

PIPELINE_NAME = "Generate video"
BASE_SECONDS = {"video.script": 2.0, "video.voice": 4.0, "video.image": 3.0, "video.render": 5.0,
                "video.composite": 3.0}
RATE_LIMIT_PAUSE_S = 1.0  # the render stage's sleep between the paid API and the upload
UPLOAD_CONFIRM_S = 3.0  # how long the fake upload service takes to confirm an upload
UPLOAD_TIMEOUT_S = 600.0  # the render stage's wait for the confirmation


# What every stage reads: jobdesk.processors.models.StageInput, loaded at the first job.
STAGE_INPUT = ModelLater("jobdesk.processors.models", "StageInput")


class TransientStageError(RuntimeError):
    """A simulated hiccup (a rate limit, a flaky upstream); retrying fixes it."""


def _options(job: Job) -> dict[str, Any]:
    # The worker has checked input_data against StageInput already; this fills in the defaults.
    options = STAGE_INPUT.load().model_validate(job.input_data)
    return options.model_dump(include={"topic", "duration_scale", "fail_rate", "approval"})


async def _work(job: Job, options: dict[str, Any]) -> float:
    jitter = random.uniform(0.6, 1.4)  # noqa: S311 - simulated work
    seconds = BASE_SECONDS[job.type] * options["duration_scale"] * jitter
    await job.log(f"{job.type} on {options['topic']!r}: about {seconds:.1f} s of work")
    parts = 10  # reported as it goes, as a real stage would: the console shows the bar move
    for done in range(1, parts + 1):
        await asyncio.sleep(seconds / parts)
        await job.progress(done / parts, f"{done} of {parts} parts")
    return round(seconds, 3)


class ScriptStage(BaseProcessor):
    """Writes the script, then lays out the rest of the pipeline."""

    input_model = STAGE_INPUT  # type: ignore[assignment]

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

    input_model = STAGE_INPUT  # type: ignore[assignment]

    async def process(self, job: Job) -> ProcessorResult:
        options = _options(job)
        took = await _work(job, options)
        if random.random() < options["fail_rate"]:  # noqa: S311 - simulated failure
            raise TransientStageError(f"{job.type} service is busy, try again (attempt {job.attempt})")
        asset = "voice.wav" if job.type == "video.voice" else "frames.png"
        return ProcessorResult({"asset": f"{job.pipeline_id}/{asset}", "seconds": took})


def _upload_key(job: Job) -> str:
    return f"upload-done:{job.id}"


class FakeUploadService:
    """A stand-in for an upload service that confirms each upload later, by an event. A real one
    would call `POST /api/events`; this one emits the event from the worker's process after
    `delay_s` (at once when 0). If the worker stops first, the confirmation is lost and the render
    waits until an operator emits the event, or until its timeout."""

    _pending: set[asyncio.Task[None]] = set()

    @classmethod
    async def upload(cls, job: Job, draft: str, delay_s: float) -> dict[str, Any]:
        key = _upload_key(job)
        url = f"https://cdn.example.com/{draft}"
        if delay_s <= 0:
            await job.emit_event(key, {"url": url})
        else:
            task = asyncio.create_task(cls._confirm_later(job, key, url, delay_s), name=f"confirm {key}")
            cls._pending.add(task)
            task.add_done_callback(cls._pending.discard)
        return {"upload_key": key, "url": url}

    @staticmethod
    async def _confirm_later(job: Job, key: str, url: str, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        try:
            await job.emit_event(key, {"url": url})
        except Exception:
            log.exception("the fake upload service could not emit %s; emit it by hand: jobdesk event emit %s",
                          key, key)


async def _generate(job: Job, options: dict[str, Any]) -> dict[str, Any]:
    """The fake paid API: slow, and billed per call."""
    took = await _work(job, options)
    return {"draft": f"{job.pipeline_id}/draft.mp4", "seconds": took, "cost_usd": 0.42}


class RenderStage(BaseProcessor):
    """Renders a draft with the paid API, uploads it, waits for the upload service to confirm it,
    then holds for a human to approve the draft. A durable processor: see the module's docstring."""

    input_model = STAGE_INPUT  # type: ignore[assignment]

    async def process(self, job: Job) -> ProcessorResult:
        options = _options(job)
        scale = options["duration_scale"]
        generated = cast(dict[str, Any], await job.step("generate", _generate, job, options))
        await job.sleep(RATE_LIMIT_PAUSE_S * scale)
        await job.step("upload", FakeUploadService.upload, job, generated["draft"], UPLOAD_CONFIRM_S * scale)
        confirmed = await job.wait_for_event(_upload_key(job), timeout=UPLOAD_TIMEOUT_S)
        url = confirmed.get("url") if isinstance(confirmed, dict) else None
        return ProcessorResult({**generated, "url": url}, requires_approval=options["approval"])


class CompositeStage(BaseProcessor):
    input_model = STAGE_INPUT  # type: ignore[assignment]

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
