"""Application events dispatched on the background thread (Java's ``ApplicationEventProcessor``).

Owns the dispatch: an explicit table from event type to handler, the counterpart of
Java's ``switch (event.type())``. An engine registers its handlers (the KIP-848 consumer's:
``kproto.consumer.kip848.application_event_processor``); the look-up is by the event's
exact type, so a subclass of an event needs its own entry, and an event nobody registered
is an ``IllegalStateError``, which the network thread hands to the event's future.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from kproto.consumer.background.events import ApplicationEvent
from kproto.errors import IllegalStateError

# A handler takes its own event type: Any, since Callable is contravariant in its argument.
ApplicationEventHandlerFn = Callable[[Any], None]


class ApplicationEventProcessor:
    """``process(event)`` runs the handler registered for ``type(event)``."""

    def __init__(self, handlers: Mapping[type, ApplicationEventHandlerFn]) -> None:
        self._handlers: dict[type, ApplicationEventHandlerFn] = dict(handlers)

    def handled_types(self) -> frozenset[type]:
        return frozenset(self._handlers)

    def process(self, event: ApplicationEvent) -> None:
        handler = self._handlers.get(type(event))
        if handler is None:
            raise IllegalStateError("no handler for application event {}".format(type(event).__name__))
        handler(event)
