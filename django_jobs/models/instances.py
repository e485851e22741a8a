"""Job instances made and read without Model.__init__, where nothing could tell the difference.

``Model.__init__`` sets each field with its own setattr and asks each field for its default; for
a 24-field Job that is a good part of an enqueue's and a claimed job's client time. When the
model's ``__init__``/``from_db`` are Django's own and nothing listens to ``pre_init`` or
``post_init``, the same instance is built by filling its ``__dict__`` directly. Otherwise the
model is called as usual (tests/engine/test_write_path.py holds both to that).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable
from datetime import date
from typing import TypeVar

from django.db.models import DateField, Field
from django.db.models.base import Model, ModelState
from django.db.models.signals import post_init, pre_init

M = TypeVar("M", bound=Model)


def plainly_built(model: type[Model]) -> bool:
    """True if ``model.from_db`` is Django's own and nothing listens to pre_/post_init."""
    # A bound classmethod's function; the stubs type from_db as a plain callable.
    own = model.from_db.__func__ is Model.from_db.__func__  # type: ignore[attr-defined]
    return own and _no_init_receivers(model)


def build(model: type[M], values: dict[str, object]) -> M:
    """``model(**values)`` for concrete fields given by attname, without ``__init__`` when
    ``__init__`` is Django's and nothing listens to its signals."""
    if model.__init__ is not Model.__init__ or not _no_init_receivers(model):
        return model(**values)
    constants, called = _defaults(model)
    instance = model.__new__(model)
    fields = instance.__dict__
    fields["_state"] = ModelState()
    fields.update(constants)
    for name, field in called:
        if name not in values:
            fields[name] = field.get_default()
    fields.update(values)
    return instance


def build_many(model: type[M], shared: dict[str, object], name: str,
               values: Iterable[object]) -> list[M]:
    """``[build(model, {**shared, name: value}) for value in values]``, with the check of
    ``__init__`` and its receivers, and the merge of the shared values, made once."""
    if model.__init__ is not Model.__init__ or not _no_init_receivers(model):
        return [model(**{**shared, name: value}) for value in values]
    constants, called = _defaults(model)
    base = {**constants, **shared}
    asked = [(attname, field) for attname, field in called
             if attname not in shared and attname != name]
    made = []
    for value in values:
        instance = model.__new__(model)
        fields = instance.__dict__
        fields["_state"] = ModelState()
        fields.update(base)
        for attname, field in asked:
            fields[attname] = field.get_default()
        fields[name] = value
        made.append(instance)
    return made


def varying(model: type[Model], shared: Collection[str]) -> set[str] | None:
    """The attnames whose value may differ between instances that ``build`` makes from values
    that are the same objects for every attname in ``shared``: the fields whose default is
    asked for each instance. None when ``build`` calls the model, whose ``__init__`` or signal
    receivers may set anything."""
    if model.__init__ is not Model.__init__ or not _no_init_receivers(model):
        return None
    return {name for name, _ in _defaults(model)[1] if name not in shared}


def _no_init_receivers(model: type[Model]) -> bool:
    return not pre_init.has_listeners(model) and not post_init.has_listeners(model)


@functools.cache
def _defaults(model: type[Model]) -> tuple[dict[str, object], list[tuple[str, Field]]]:
    """The defaults that are the same every time (None, numbers, strings, dates), and the
    fields whose default must be asked for each instance (callables, anything mutable)."""
    constants: dict[str, object] = {}
    called = []
    for field in model._meta.concrete_fields:
        if field.has_default() and callable(field.default):
            called.append((field.attname, field))
            continue
        default = field.get_default()
        if default is None or isinstance(default, str | int | float | bool | date):
            constants[field.attname] = default
        else:
            called.append((field.attname, field))
    return constants, called


def plain_pre_save(field: Field) -> bool:
    """True if ``field.pre_save`` only reads the attribute (Field's own, or a date field
    that is neither auto_now nor auto_now_add): then a value ``build`` gave every instance
    alike stays alike on save."""
    if type(field).pre_save is Field.pre_save:
        return True
    return isinstance(field, DateField) and not field.auto_now and not field.auto_now_add


def insert_fields(model: type[Model], varying: Collection[str] | None = None
                  ) -> tuple[list[Field], list[Field]]:
    """The fields a one-statement bulk INSERT writes (all but the primary key), and those of
    them whose value it sends per job: the ``varying`` attnames (None: every field) and any
    field whose ``pre_save`` gives each instance its own value (``auto_now``)."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    per_job = [
        f for f in fields if varying is None or f.attname in varying or not plain_pre_save(f)
    ]
    return fields, per_job
