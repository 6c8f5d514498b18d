"""The errors a metadata update carries, for both engines' ``poll()``.

Topics a Metadata response names as unauthorized or invalid are raised from the next
``poll()``, once per update: the classic consumer asks on its application thread, the
KIP-848 engine's ``NetworkClientDelegate`` on the background thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from kproto import errors

if TYPE_CHECKING:
    from kproto.net.metadata import ClusterMetadata


class MetadataErrorTracker:
    """Java's ``Metadata.maybeThrowAnyException`` for a consumer's poll loop: the error the
    latest metadata update carries (unauthorized or invalid topics), once per update.

    ``ClusterMetadata`` replaces its ``unauthorized_topics``/``invalid_topics`` sets on every
    update, so the sets' identity tells a new update from one already reported.
    """

    __slots__ = ("_cluster", "_seen")

    def __init__(self, cluster: ClusterMetadata) -> None:
        self._cluster = cluster
        self._seen: tuple[Any, Any] = (None, None)

    def get_and_clear(self) -> Optional[BaseException]:
        unauthorized, invalid = self._cluster.unauthorized_topics, self._cluster.invalid_topics
        if unauthorized is self._seen[0] and invalid is self._seen[1]:
            return None
        self._seen = (unauthorized, invalid)
        if unauthorized:
            return errors.error_for(errors.ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    "Not authorized to access topics: {}".format(sorted(unauthorized)))
        if invalid:
            return errors.error_for(errors.ErrorCode.INVALID_TOPIC_EXCEPTION, "Invalid topics: {}".format(sorted(invalid)))
        return None
