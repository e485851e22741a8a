"""The handlers: their registration (``registry``), what ``@handler`` returns (``typed_handler``)
and a handler's typed arguments: the reading of its annotations, the checks of a value against
them (as JSON to store at enqueue, rebuilt for the call) and the JSON Schema they accept.

It sits with ``core/`` at the bottom of the layers: it imports nothing of the package but
``core/`` and the root's ``exceptions``, and every layer above may use it.
"""
