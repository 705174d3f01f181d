from django.db import transaction
from django.http import HttpRequest, JsonResponse

from shop.tasks import add


def order(request: HttpRequest) -> JsonResponse:
    """Enqueues in the request's transaction: the task exists once the transaction commits."""
    with transaction.atomic():
        result = add.enqueue(int(request.GET["a"]), int(request.GET["b"]))
    return JsonResponse({"id": result.id, "status": result.status})


class Refused(Exception):
    pass


def order_that_fails(request: HttpRequest) -> JsonResponse:
    """Enqueues, then fails before the commit: the task never existed."""
    try:
        with transaction.atomic():
            result = add.enqueue(1, 1)
            raise Refused(result.id)
    except Refused as exc:
        return JsonResponse({"id": str(exc)}, status=409)
