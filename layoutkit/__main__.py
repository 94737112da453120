"""``python -m layoutkit`` and the ``layoutkit`` command."""

from layoutkit.cli import app


def main() -> None:
    app(prog_name="layoutkit")


if __name__ == "__main__":  # spawned worker processes import this module too
    main()
