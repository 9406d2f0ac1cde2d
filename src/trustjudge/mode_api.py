"""The mode-writing API: every name a judging mode needs, from one public module (pinned by a test).

A mode is a :class:`Mode`: its task (a :class:`Task` subclass turning items into :class:`Question` objects and
their :class:`Outcome` objects into records), its record (a dataclass over :class:`ResponseHeader` or
:class:`PairHeader`), its options (a frozen dataclass of :func:`option` fields) and, where it has them, its
calibration (:class:`LabelUnits` for fixed labels, :class:`LevelUnits` for a distribution over a scale's
levels that agrees within a tolerance, or any :class:`UnitReader`), its summary (:class:`SummaryMetrics`) and its
report sections (:class:`Section` of :class:`Note` and :class:`Table` blocks), its cascade (:class:`ByResponse`,
:class:`ByPair`, :class:`ByPart`, or any :class:`Cascading`), its templates (:class:`TemplateSpec`, a file in
the mode's own package) and how ``store show`` lists its judgments (:class:`StoredJudgments`). Images: an
item's and a response's :class:`Image` objects go into a prompt as :func:`images_block` (their markers; a vision
judge sends the images there), :func:`pictures` gives a judgment's :class:`Pictures` for the built-in templates' image
fields, and :func:`judged_empty` says a response has neither text nor image. The built-in modes and a plug-in
(``[project.entry-points."trustjudge.modes"]``) are written against these same names; docs/modes.md shows one.
"""

from __future__ import annotations

from ._images import Image, images_block
from .audit._readers import LevelUnits
from .audit._summary import SummaryMetrics
from .audit._units import LabelUnits, Unit, UnitReader
from .engine._asking import Question
from .engine._engine import Outcome
from .io._items import Item, Response
from .io._quoting import quote
from .modes._base import Asking, AuditContext, Cost, Task, judged_empty, pictures
from .modes._cascading import ByPair, ByPart, ByResponse, Cascading
from .modes._prompts import ANSWER_MARKER, SYSTEM, Pictures
from .modes._records import PairHeader, RecordBase, ResponseHeader, optional
from .modes._registry import MODES, JudgeSettings, Mode, TemplateSpec, get_mode, option, register_mode, unregister_mode
from .modes._sections import Note, Section, Table, fields_section
from .modes._stored import StoredJudgments

__all__ = [
    "ANSWER_MARKER",
    "MODES",
    "SYSTEM",
    "Asking",
    "AuditContext",
    "ByPair",
    "ByPart",
    "ByResponse",
    "Cascading",
    "Cost",
    "Image",
    "Item",
    "JudgeSettings",
    "LabelUnits",
    "LevelUnits",
    "Mode",
    "Note",
    "Outcome",
    "PairHeader",
    "Pictures",
    "Question",
    "RecordBase",
    "Response",
    "ResponseHeader",
    "Section",
    "StoredJudgments",
    "SummaryMetrics",
    "Table",
    "Task",
    "TemplateSpec",
    "Unit",
    "UnitReader",
    "fields_section",
    "get_mode",
    "images_block",
    "judged_empty",
    "optional",
    "option",
    "pictures",
    "quote",
    "register_mode",
    "unregister_mode",
]
