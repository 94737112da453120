"""layoutkit: file-layout conversion and optimisation for scientific HDF5 data."""

__version__ = "0.1.0"

from layoutkit.archive import Archive  # noqa: E402
from layoutkit.archive import open_archive as open  # noqa: E402
from layoutkit.convert import ConvertOptions, convert, plan_convert  # noqa: E402
from layoutkit.errors import LayoutkitError  # noqa: E402

__all__ = ["Archive", "ConvertOptions", "LayoutkitError", "__version__", "convert", "open", "plan_convert"]
