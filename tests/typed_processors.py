"""A processor with a typed input, loaded with `--processors typed_processors` or
JOB_PROCESSOR_MODULES=typed_processors in the input-model tests."""

from __future__ import annotations

from pydantic import BaseModel, Field

from jobdesk import BaseProcessor, Job, ProcessorResult


class Line(BaseModel):
    sku: str
    qty: int = Field(gt=0)


class Order(BaseModel):
    customer: str
    lines: list[Line]


class Invoice(BaseProcessor):
    input_model = Order

    async def process(self, job: Job) -> ProcessorResult:
        order = Order.model_validate(job.input_data)
        return ProcessorResult({"items": sum(line.qty for line in order.lines)})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {"test.invoice": Invoice}
