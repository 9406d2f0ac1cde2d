"""Prompt templates: reading one (a user's file or text, else the file a mode ships) and checking its fields.

A template is a ``string.Template``; a mode names the fields its template must have (``Mode.templates``), and
every template may use :data:`OPTIONAL_FIELDS`. :func:`read_template` finds a packaged file in the ``templates``
folder of the package of the mode that owns it.
"""

from __future__ import annotations

import string
from importlib.resources import files
from pathlib import Path

from ..errors import ConfigError

IMAGE_FIELDS = ("question_images", "reference_images", "response_images", "response_a_images", "response_b_images")
"""Where a template places images: the item's pictures, its reference figures, the response's (pairwise: each
response's) images. Empty for an item without them, so a text item's prompt is as it was."""
OPTIONAL_FIELDS = {"context", "reference", "context_block", "reference_block", "grounding_block", "scale_min",
                   "scale_max", "task", *IMAGE_FIELDS}


def read_template(path: str | Path | None, default: str, required: set[str] | frozenset[str],
                  package: str = "trustjudge") -> string.Template:
    """A user's template (a file; or, as a string holding a newline or a ``$``, the template's text itself, as
    the claims stages take it), or the packaged ``default`` (in the ``templates`` folder of ``package``: the
    package of the mode that owns it), checked for its fields."""
    if path is None:
        try:
            text = files(package).joinpath("templates").joinpath(default).read_text(encoding="utf-8")
        except (ModuleNotFoundError, OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the packaged template {package}/templates/{default}: {exc}") from exc
    elif isinstance(path, str) and ("\n" in path or "$" in path):
        return check_template(path, "template (given as text)", required)
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read template {path}: {exc}") from exc
    return check_template(text, f"template {path or default}", required)


def check_template(text: str, what: str, required: set[str] | frozenset[str]) -> string.Template:
    """``text`` as a template, checked for its fields (``what`` names it in the errors: ``template PATH``)."""
    template = string.Template(text)
    names, valid = _identifiers(template)
    if not valid:
        raise ConfigError(f"{what}: a '$' that is not a field; write '$$' for a dollar sign")
    missing = required - names
    unknown = names - required - OPTIONAL_FIELDS
    if missing:
        fields = ", ".join("${" + m + "}" for m in sorted(missing))
        raise ConfigError(f"{what} lacks the field(s) {fields}")
    if unknown:
        raise ConfigError(f"{what} uses unknown field(s) {', '.join(sorted(unknown))}")
    return template


def _identifiers(template: string.Template) -> tuple[set[str], bool]:
    """The fields of ``template`` and whether every ``$`` in it is a field or ``$$``: what
    ``Template.get_identifiers()`` and ``is_valid()`` say on Python 3.11+, read from the same pattern."""
    names: set[str] = set()
    valid = True
    for m in template.pattern.finditer(template.template):
        name = m.group("named") or m.group("braced")
        if name is not None:
            names.add(name)
        elif m.group("invalid") is not None:
            valid = False
    return names, valid


def _compile(template: string.Template) -> tuple[tuple[str, str | None], ...]:
    """``template`` as (literal, field name) parts: rendering joins them without a regex pass per prompt."""
    parts: list[tuple[str, str | None]] = []
    text, pos = template.template, 0
    for match in template.pattern.finditer(text):
        literal = text[pos : match.start()]
        if match.group("escaped") is not None:
            parts.append((literal + template.delimiter, None))
        else:
            parts.append((literal, match.group("named") or match.group("braced")))
        pos = match.end()
    parts.append((text[pos:], None))
    return tuple(parts)
