"""The conformance suite (:mod:`layoutkit.testing`) over every registered layout.

One test class per layout of the registry is made here, so a layout registered without
passing the suite fails a test: nothing needs to be written for a new layout to be
covered. Each class runs the round trip on every destination (local, a bucket on a real
S3 endpoint on loopback, an Icechunk repository), the layout's default options.
"""

from __future__ import annotations

import pytest

from layoutkit.layouts import LAYOUTS
from layoutkit.testing import LayoutTests


def _class_name(name: str) -> str:
    return "Test" + "".join(part.capitalize() for part in name.replace("_", "-").split("-")) + "Conformance"


SUITES = {
    name: type(_class_name(name), (LayoutTests,), {"layout": layout, "__module__": __name__})
    for name, layout in LAYOUTS.items()
}
globals().update({cls.__name__: cls for cls in SUITES.values()})


def test_every_registered_layout_runs_the_suite() -> None:
    collected = {name: cls for name, cls in globals().items()
                 if isinstance(cls, type) and issubclass(cls, LayoutTests) and cls is not LayoutTests}
    assert {cls.layout.name for cls in collected.values()} == set(LAYOUTS)
    assert all(name.startswith("Test") for name in collected)  # pytest collects them


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_layout_claims_only_destinations_the_suite_knows(name: str) -> None:
    from layoutkit.layout import DESTINATION_KINDS

    assert set(LAYOUTS[name].destinations) <= set(DESTINATION_KINDS) and LAYOUTS[name].destinations
