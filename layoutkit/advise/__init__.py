"""``layoutkit advise``: try candidate layouts on samples of a source, predict their cost
at full size, and recommend one (:func:`~layoutkit.advise.run.advise`)."""

from layoutkit.advise.run import AdviseOptions, AdviseResult, advise, write_outputs

__all__ = ["AdviseOptions", "AdviseResult", "advise", "write_outputs"]
