from django.tasks import task


@task
def add(a: int, b: int) -> int:
    return a + b


class OutOfStock(Exception):
    pass


@task
def always_fails(item: str) -> None:
    raise OutOfStock(f"no {item} left")


@task(priority=10)
async def shout(word: str) -> str:
    return word.upper()
