from django.urls import path
from shop import views

urlpatterns = [
    path("order/", views.order),
    path("order-that-fails/", views.order_that_fails),
]
