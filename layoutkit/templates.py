"""Shot archives' templates: where a signal lives (``/shots/{shot}/signals/{signal}``),
the shot and signal a path names, and shots in their natural order.

Every layer reads paths through these; nothing here opens a file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from layoutkit.errors import InvalidOptionError
from layoutkit.options import RecipeKey

DEFAULT_TEMPLATE = "/shots/{shot}/signals/{signal}"



def compile_template(template: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Turn ``/shots/{shot}/signals/{signal}`` into two regexes: one matching a signal
    path (groups ``shot`` and ``signal``), one matching a path's shot prefix (the part
    up to and including the ``{shot}`` component). Each placeholder is one component."""
    if template.count("{shot}") != 1 or template.count("{signal}") != 1:
        raise InvalidOptionError(
            f"Expected a --template with one {{shot}} and one {{signal}}, such as "
            f"{DEFAULT_TEMPLATE}. Got {template!r}."
        )
    parts = re.split(r"(\{shot\}|\{signal\})", "/" + template.strip("/"))
    full = "".join(
        "(?P<shot>[^/]+)" if p == "{shot}" else "(?P<signal>[^/]+)" if p == "{signal}" else re.escape(p)
        for p in parts
    )
    head = template[: template.index("{shot}")]
    prefix = "^" + re.escape("/" + head.strip("/") + "/" if head.strip("/") else "/") + "(?P<shot>[^/]+)(?:/|$)"
    return re.compile("^" + full + "$"), re.compile(prefix)


def parse_template(text: object) -> str:
    """A shot-archive template such as ``/shots/{shot}/signals/{signal}`` (command line or recipe)."""
    compile_template(str(text))  # raises with what was expected
    return str(text)


TEMPLATE_KEY = RecipeKey("template", "template", parse_template, str,
                         "a template such as \"/shots/{shot}/signals/{signal}\"")


def natural_key(name: str) -> tuple[int, int | str]:
    """Sort key: numeric names (shot numbers) in numeric order, before other names."""
    return (0, int(name)) if name.isdigit() else (1, name)


def match_template(paths: Sequence[str], template: str) -> dict[str, tuple[str, str]]:
    """Map each path that matches the template to its ``(shot, signal)``."""
    full, _ = compile_template(template)
    out = {}
    for p in paths:
        m = full.match(p)
        if m:
            out[p] = (m.group("shot"), m.group("signal"))
    return out
