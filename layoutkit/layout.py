"""What a layout is: one object that writes it, reads it back and proves it equal.

A layout is a :class:`Layout` subclass registered by name in :mod:`layoutkit.layouts`,
as a zarr codec is one class registered by name. It owns its whole format:

- the write side: its options and recipe keys, a pure planner (:meth:`Layout.plan`),
  the skeleton and tasks (:meth:`Layout.begin`), which :mod:`layoutkit.pipeline` runs
  the same way for every layout;
- the read side: :meth:`Layout.open` returns the :class:`~layoutkit.readers.base.Archive`
  that reads its output (what :func:`layoutkit.open` hands out), and
  :meth:`Layout.compare` proves an output equal to its source (what ``verify`` runs).

A layout is one package (``layoutkit/layouts/signal_major/``) whose ``Layout`` subclass
names its parts by role, each a typed object (:class:`Planner`, :class:`Writer`,
:class:`Reader`, :class:`Comparator`, :class:`Appender`) that the subclass's role
factory imports when first used, so that the registry itself loads no writer, reader or
Zarr::

    class SignalMajor(ZarrLayout[SignalMajorPlan]):
        def planner(self) -> Planner[ConvertOptions, SignalMajorPlan]:
            from layoutkit.layouts.signal_major import plan
            return plan

A module is a role object when it has the role's functions (``plan.py``: ``plan``;
``write.py``: ``begin``, ``summarize``, optionally ``finish``; ``read.py``:
``open_archive``; ``compare.py``: ``compare``; ``append.py``: ``merge``, how a staged
store of new shots joins a store, in the vocabulary of :mod:`layoutkit.merging`), so a
type checker follows a run from the command to the chunk write. ``spec.py`` holds the
names, version and encodings both directions import.

Everything else (the CLI's choices and help, recipes, ``inspect``, ``advise``,
``verify``, the reader registry) is derived from the registry, so a new layout is one
package and one registry line; :mod:`layoutkit.testing` is the conformance suite every
registered layout runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from layoutkit.equality import Mismatch
    from layoutkit.hdf5.inventory import Inventory
    from layoutkit.hdf5.scales import ScaleDigest
    from layoutkit.merging import Merge, StoreDocs
    from layoutkit.options import RecipeKey
    from layoutkit.readers.base import Archive
    from layoutkit.storage import Destination, Source

DESTINATION_KINDS = ("local", "bucket", "icechunk")
"""Where an output can be written: a local path, an object-store URL, an Icechunk repository."""


@dataclass
class Work:
    """What a layout hands the pipeline once its output's skeleton exists.

    ``fn(job, task)`` is called for every task; it must be a module-level function so
    that dask can ship it to worker processes. Without a ``sink`` the engine runs the
    tasks in any order and ``fn`` returns the bytes it wrote. With a ``sink``, results
    are consumed in task order on the calling thread (``sink(result)`` writes one and
    returns its bytes), at most ``window`` of them pending.
    """

    fn: Callable[[Any, Any], Any]
    job: Any
    tasks: Iterable[Any]
    sink: Callable[[Any], int] | None = None
    window: int | None = None
    cleanup: Callable[[], None] | None = None  # in every worker process, after the last task
    close: Callable[[], None] = lambda: None  # always, on success or failure
    ready: Callable[[], None] = lambda: None
    """Waits for the skeleton's writes still in flight (raising their error): the pipeline
    calls it before tasks that run in other processes (they read the skeleton from the
    destination) and before finishing; ``close`` must stop them."""
    done_bytes: int = 0  # bytes the layout already wrote while creating the skeleton
    complete: Callable[[bool], None] | None = None
    """Completes a store's skeleton once every task ran: its consolidated metadata (True)
    or not (False); :class:`~layoutkit.zarr_layout.ZarrLayout` calls it."""
    counts: Counter[str] = field(default_factory=Counter)
    """What the tasks counted (:class:`Done`), summed in the driver whatever process ran
    them: the summary reads it."""
    state: dict[str, Any] = field(default_factory=dict)  # the layout's own, for its own summarize


@dataclass(frozen=True)
class Done:
    """What a task returns when it has more to tell than its bytes: counts the pipeline
    adds to :attr:`Work.counts` (a task that ran in a worker process cannot add to the
    driver's objects itself)."""

    nbytes: int
    counts: dict[str, int] = field(default_factory=dict)


OptionsT = TypeVar("OptionsT")
PlanT = TypeVar("PlanT")
SummaryT = TypeVar("SummaryT")
OptionsIn = TypeVar("OptionsIn", contravariant=True)
PlanOut = TypeVar("PlanOut", covariant=True)
PlanIn = TypeVar("PlanIn", contravariant=True)
SummaryOut = TypeVar("SummaryOut", covariant=True)


class Planner(Protocol[OptionsIn, PlanOut]):
    """Plans the whole output from the source's inventory: pure, no I/O."""

    def plan(self, inventory: Inventory, options: OptionsIn, scale_digests: dict[str, ScaleDigest],
             dest: str = "", /) -> PlanOut: ...


class Writer(Protocol[PlanIn, SummaryOut]):
    """Creates the output's skeleton and the work that fills it, and sums a finished run up."""

    def begin(self, staged: Any, source: Any, inventory: Inventory, plan: PlanIn, attrs: dict[str, Any], /) -> Work: ...

    def summarize(self, source: Any, dest: Any, inventory: Inventory, plan: PlanIn, work: Work,
                  seconds: float, /) -> SummaryOut: ...


class Finisher(Protocol[PlanIn]):
    """A writer that completes its staged output after the tasks (consolidation, closing)."""

    def finish(self, work: Work, staged: Any, plan: PlanIn, /) -> None: ...


class Reader(Protocol):
    """Opens an output of the layout as an :class:`~layoutkit.readers.base.Archive`."""

    def open_archive(self, location: Any, *, template: str, model: Any = None, sleep: Any = None,
                     page_buffer: int | None = None, root: Any = None) -> Archive: ...


class Comparator(Protocol):
    """Proves an output equal to its source: every difference, or none."""

    def compare(self, source: Any, variant: Any, *, inventory: Any, skipped: frozenset[str] = frozenset(),
                workers: int = 2, name: str | None = None) -> list[Mismatch]: ...


class Appender(Protocol):
    """Joins a staged store of new shots to a store of the layout (``convert --append``)."""

    def merge(self, old: StoreDocs, new: StoreDocs, options: Any, /) -> Merge: ...


class Layout(ABC, Generic[OptionsT, PlanT, SummaryT]):
    """A way of writing a source, reading the result and proving it equal.

    Subclasses set the class attributes and the role factories (:meth:`planner`,
    :meth:`writer`, :meth:`reader`, :meth:`comparator`, and :meth:`appender` where the
    layout appends); :mod:`layoutkit.layouts` registers them. Generic over its options,
    its plan and its summary.
    """

    name: ClassVar[str]
    """The one name of the layout: the CLI's value, a recipe's ``layout``, the registry
    key and, for a Zarr layout, the name its stores record (e.g. ``"signal-major"``)."""
    aliases: ClassVar[tuple[str, ...]] = ()
    """Older spellings that are still read (recipes, registry lookups, ``--order``)."""
    command: ClassVar[str]  # the command that writes it: "convert" or "reorder"
    order: ClassVar[str | None] = None  # convert's former --order value for it ("shot", "signal"...)
    target: ClassVar[str]  # the recipe target: "zarr" or "hdf5-paged"
    format: ClassVar[str]  # what it writes: "zarr", "hdf5", or the layout's own format
    suffix: ClassVar[str]  # how its outputs are named: ".zarr", ".h5", ".icechunk" (advise names its candidates so)
    output: ClassVar[str] = "store"  # "store" (a Zarr key-value target) or "file" (a local path)
    destinations: ClassVar[tuple[str, ...]] = DESTINATION_KINDS  # where it can write (DESTINATION_KINDS)
    appends: ClassVar[bool] = False
    """Whether its outputs can be appended to (``convert --append``; a set of many
    sources is then written in batches): it ships ``append.py``, and the conformance
    suite (:class:`layoutkit.testing.LayoutTests`) runs its append round trips.
    :meth:`can_append` says for which options."""
    rewrites: ClassVar[bool] = True
    """Whether its outputs hold a copy of the data (False: references into the sources,
    the option ``advise`` weighs against rewriting)."""
    options_class: ClassVar[type]
    recipe_keys: ClassVar[tuple[RecipeKey, ...]]
    description: ClassVar[str] = ""
    recipes: ClassVar[Traversable | None] = None
    """A folder of recipe files (``NAME.toml``) the layout ships: listed by ``layoutkit
    recipes``, found by ``--recipe NAME``, and tried by ``advise`` beside layoutkit's own."""

    # -- the roles ------------------------------------------------------------------------

    @abstractmethod
    def planner(self) -> Planner[OptionsT, PlanT]:
        """The layout's planner (its ``plan.py``)."""

    @abstractmethod
    def writer(self) -> Writer[PlanT, SummaryT]:
        """The layout's writer (its ``write.py``)."""

    @abstractmethod
    def reader(self) -> Reader:
        """The layout's reader (its ``read.py``)."""

    @abstractmethod
    def comparator(self) -> Comparator:
        """The layout's proof (its ``compare.py``)."""

    def appender(self) -> Appender:
        """How stores of new shots join a store of the layout (its ``append.py``), for a
        layout that :attr:`appends`."""
        raise NotImplementedError(f"the layout {self.name!r} does not append")

    @property
    def names(self) -> tuple[str, ...]:
        """Every spelling that selects this layout: its name, then its aliases."""
        return (self.name, *self.aliases)

    def default_options(self) -> OptionsT:
        """The options this layout writes with when nothing is chosen (the layout itself
        chosen, where its options class serves several)."""
        options: OptionsT = self.options_class()
        return options

    # -- the write side ---------------------------------------------------------------

    def scale_template(self, options: Any) -> str | None:
        """The template whose dimension scales are fingerprinted before planning (for
        deduplication), or None when the layout does not deduplicate scales."""
        return None

    def plan(self, inventory: Inventory, options: OptionsT, scale_digests: dict[str, ScaleDigest],
             dest: str = "") -> PlanT:
        """Plan the whole output from the inventory: pure, no I/O. The plan has an
        ``nbytes`` attribute (the bytes the tasks will write, for progress).
        ``scale_digests``: the fingerprints of the scales under :meth:`scale_template`."""
        return self.planner().plan(inventory, options, scale_digests, dest)

    def begin(self, staged: Any, source: Source, inventory: Inventory, plan: PlanT, attrs: dict[str, Any]) -> Work:
        """Create the output's skeleton at ``staged`` (root attributes ``attrs`` included)
        and return the work that fills it. ``staged`` is a local path for an ``output`` of
        "file"; for "store", a path or a key-value target (:func:`layoutkit.storage.as_kv`)."""
        return self.writer().begin(staged, source, inventory, plan, attrs)

    def finish(self, work: Work, staged: Any, plan: PlanT) -> None:
        """Complete the staged output after every task ran (consolidate, close): the
        writer's ``finish`` if it has one (a :class:`Finisher`), else nothing."""
        finish = getattr(self.writer(), "finish", None)
        if finish is not None:
            finish(work, staged, plan)

    def summarize(self, source: Source, dest: Destination, inventory: Inventory, plan: PlanT, work: Work,
                  seconds: float) -> SummaryT:
        """The command's summary of a finished run (its ``lines()`` are what the command prints)."""
        return self.writer().summarize(source, dest, inventory, plan, work, seconds)

    # -- the read side ----------------------------------------------------------------

    def open(self, location: Any, *, template: str, model: Any = None, sleep: Any = None, page_buffer: int | None = None,
             root: Any = None) -> Archive:
        """The :class:`~layoutkit.readers.base.Archive` over an output of this layout.

        ``location`` is a local path or a URL; ``model`` simulates latency, ``sleep``
        replaces the wait (tests), ``page_buffer`` is HDF5's page buffer, and ``root``
        the already opened Zarr root group of a store (:func:`layoutkit.archive.open_archive`
        reads it to find the layout)."""
        return self.reader().open_archive(location, template=template, model=model, sleep=sleep,
                                          page_buffer=page_buffer, root=root)

    def compare(self, source: Any, variant: Any, *, inventory: Inventory, skipped: frozenset[str] = frozenset(),
                workers: int = 2, name: str | None = None) -> list[Mismatch]:
        """Every difference between an output of this layout and its source (empty: equal).

        ``variant`` is what :func:`layoutkit.verify.equality.compare_variant` located: a
        local path, a zarr store over a bucket prefix or an Icechunk session, or an
        :class:`~layoutkit.storage.ObjectSource`; ``skipped``: datasets it leaves out on
        purpose; ``name``: how the report names it."""
        return self.comparator().compare(source, variant, inventory=inventory, skipped=skipped, workers=workers,
                                         name=name)

    def appendable(self, recorded: dict[str, Any]) -> bool:
        """Whether ``convert --append`` adds shots to a store of this layout whose root
        records ``recorded`` (its layout attribute: name and version)."""
        return False

    def can_append(self, options: Any) -> bool:
        """Whether a store this layout writes with ``options`` can be appended to (and so a
        set of many sources written in batches: :mod:`layoutkit.appending.batches`); never unless
        :attr:`appends`."""
        return False

    def merge(self, old: StoreDocs, new: StoreDocs, options: OptionsT) -> Merge:
        """How a staged store of new shots joins a store of this layout: the
        :meth:`appender`'s ``merge``."""
        return self.appender().merge(old, new, options)

    def needs_shot_archive(self, options: Any) -> bool:
        """Whether, with ``options``, the layout orders shots and signals, and so refuses a
        file the template does not match (``advise`` leaves it out for such files)."""
        return False

    def merges_scales(self, options: Any) -> bool:
        """Whether, with ``options``, a dimension scale that repeats another is stored once
        and read under the kept one's name (its values unchanged)."""
        return False

    def guess_can_open(self, location: Path) -> bool:
        """Whether a local ``location`` that is neither Zarr nor HDF5 holds this layout
        (xarray's ``guess_can_open``); layouts of those two formats are found by what
        the store or file records, and need not say."""
        return False

    def __repr__(self) -> str:
        return f"<layout {self.name!r}>"


AnyLayout: TypeAlias = Layout[Any, Any, Any]
"""A layout of any options, plan and summary (what the registry holds)."""

__all__ = ["DESTINATION_KINDS", "AnyLayout", "Appender", "Comparator", "Done", "Finisher", "Layout", "Planner", "Reader", "Work", "Writer"]
