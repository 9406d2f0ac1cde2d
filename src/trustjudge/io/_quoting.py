"""Quoting: the delimiter tags of the judge's prompts neutralised in every text quoted into them.

A quoted text (a question, a response, a turn of a transcript, a passage) cannot open or close a block of the
prompt and pose as instructions: :func:`quote` escapes every span a model would read as one of the tags, however
it is written (any case, spacing, attributes, invisible characters, full-width forms, a missing ``>``).
The prompts (``modes/_prompts.py``) and the transcripts of turns responses (``io/_items.py``) both use it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

import regex

DEFAULT_TAGS = ("response", "response_a", "response_b", "question", "context", "reference_answer", "profile",
                "knowledge", "evidence", "criterion", "check", "claim", "reference_claim", "reference_image")


def tag_pattern(names: Iterable[str]) -> re.Pattern[str]:
    """A regex for the delimiter tags ``<name>`` / ``</name>`` at the start of a folded text: any case, spaces
    inside the brackets, attributes (``<evidence n="9">``), with or without the closing ``>``."""
    alternatives = "|".join(sorted((re.escape(n) for n in set(names)), key=len, reverse=True))
    return re.compile(rf"<\s*/?\s*(?:{alternatives})(?![\w-])", re.IGNORECASE)


_TAGS = tag_pattern(DEFAULT_TAGS)
# Invisible characters a text can hide inside a tag: a model reads "</res\u200bponse>" as the tag. Every
# code point of Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt, as the `regex`
# package ships it: soft hyphen, combining grapheme joiner, Arabic letter mark, Hangul fillers U+115F-1160,
# U+3164 and U+FFA0, Khmer inherent vowels U+17B4-17B5, Mongolian free variation selectors U+180B-180F,
# zero-width space/joiners, direction marks, overrides and isolates, word joiner and friends, variation
# selectors U+FE00-FE0F and U+E0100-E01EF, BOM, shorthand format controls U+1BCA0-1BCA3, musical symbol
# formatting U+1D173-1D17A, tag characters), not a hand list.
_INVISIBLE: Any = regex.compile(r"\p{Default_Ignorable_Code_Point}+")
_OPENERS = ("<", "\uff1c", "\ufe64")  # "<", full-width and small variants: all that NFKC folds to "<"
# Where a tag may be: an opener up to the next closer (">" and the variants that NFKC folds to it), or up to
# the next opener or the end when none closes it. Spans do not overlap, so every opener starts one.
_SPAN = re.compile("[<\uff1c\ufe64][^<>\uff1c\uff1e\ufe64\ufe65]*[>\uff1e\ufe65]?")


def _fold(text: str) -> str:
    """``text`` as a model may read it: invisible characters removed, NFKC look-alikes folded (full-width,
    small and compatibility forms), and invisible characters removed again (from what NFKC gave)."""
    folded: str = _INVISIBLE.sub("", unicodedata.normalize("NFKC", _INVISIBLE.sub("", text)))
    return folded


def quote(text: str, tags: re.Pattern[str] = _TAGS) -> str:
    """``text`` with the template's delimiter tags neutralised (``</response>`` -> ``&lt;/response&gt;``),
    so that a quoted text cannot close or open a block and pose as instructions.

    Each span from a ``<`` to its ``>`` is judged in its folded form (NFKC, invisible characters removed), so
    variants a model reads as the same tag count too, whatever else the text holds: spaces inside the
    brackets (``< /response>``), attributes (``</evidence n="1">``), any case, invisible characters inside
    it, full-width forms (``＜／ｒｅｓｐｏｎｓｅ＞``), a missing ``>``. A tag is written folded and escaped
    (an unclosed one loses its opener only); the rest of the text is unchanged.
    """
    if not any(o in text for o in _OPENERS) or tags.search(_fold(text)) is None:  # no tag, however written
        return text

    def escape(span: re.Match[str]) -> str:
        folded = _fold(span.group())
        if tags.match(folded) is None:
            return span.group()
        if not folded.endswith(">"):  # an unclosed tag: its opener is enough, the text after it stays as written
            return "&lt;" + span.group()[1:]
        return "&lt;" + folded[1:-1] + "&gt;"

    return _SPAN.sub(escape, text)
