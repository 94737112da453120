"""``layoutkit verify``: equality of variants with their source, and read-pattern measurements."""

from layoutkit.verify.equality import compare_variant

__all__ = ["compare_variant"]
