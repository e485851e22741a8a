"""Typed fixture handlers: arguments by name, a dataclass, a TypedDict, a pydantic model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

from django_jobs import handler


@dataclass
class Line:
    sku: str
    quantity: int = 1


@dataclass
class Order:
    id: int
    lines: list[Line]
    note: str | None = None
    pair: tuple[int, int] = (0, 0)
    tags: list[str] = field(default_factory=list)


class Address(TypedDict):
    city: str
    zip: str
    floor: NotRequired[int]


@handler("typed_kwargs")
def send_email(order_id: int, subject: str = "hello", *, urgent: bool = False,
               ratio: float | None = None) -> dict:
    return {"order_id": order_id, "subject": subject, "urgent": urgent, "ratio": ratio,
            "ratio_type": type(ratio).__name__}


@handler("typed_keyword_only")
def notify(*, user_id: int, channel: Literal["mail", "sms"] = "mail") -> dict:
    return {"user_id": user_id, "channel": channel}


@handler("typed_dataclass")
def ship(order: Order) -> dict:
    return {
        "class": type(order).__name__,
        "line_class": type(order.lines[0]).__name__ if order.lines else None,
        "skus": [line.sku for line in order.lines],
        "units": sum(line.quantity for line in order.lines),
        "pair_type": type(order.pair).__name__,
        "note": order.note,
    }


@handler("typed_typeddict")
def geocode(address: Address) -> dict:
    return {"type": type(address).__name__, "city": address["city"],
            "floor": address.get("floor")}


@handler("typed_async")
async def async_typed(order: Order, *, times: int = 1) -> dict:
    return {"class": type(order).__name__, "times": times}


try:
    from pydantic import BaseModel, ConfigDict, PositiveInt
except ImportError:  # the pydantic tests skip without it
    BaseModel = None
else:
    class Invoice(BaseModel):
        # Strict: what it accepts is what its JSON Schema (in the API's document) says.
        model_config = ConfigDict(strict=True)

        number: str
        amount: PositiveInt
        lines: list[str] = []

    @handler("typed_pydantic")
    def bill(invoice: Invoice) -> dict:
        return {"class": type(invoice).__name__, "number": invoice.number,
                "amount": invoice.amount}
