"""Suite-wide: the order pytest-xdist hands tests out in.

`make test` runs with ``--dist worksteal``: each worker starts on its share of the collection, in
order, and a worker that runs dry takes half of what another still has queued. The longest test
(tests/chaos, about 3 minutes on a 2-core machine) must therefore be first: started last, it
would run alone at the end while the other worker idles. The other long suites (marked ``slow``)
come next, so the short tests fill the gaps between them at the end. The order inside each group,
and so inside each module, stays the collection order; no test depends on another's having run.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

# No property test fails for taking long: Hypothesis's default deadline (200 ms per example) is a
# timed assertion, and on a shared, loaded 2-core machine an example took 291 ms (DeadlineExceeded,
# then FlakyFailure). Speed is measured by make bench, never by tests.
settings.register_profile("court", deadline=None)
settings.load_profile("court")

FIRST = ("tests/chaos/",)


def _rank(item: pytest.Item) -> int:
    if item.nodeid.startswith(FIRST):
        return 0
    if item.get_closest_marker("slow") is not None:
        return 1
    return 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: ties keep the collection order
