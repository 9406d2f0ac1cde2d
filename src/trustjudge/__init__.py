"""trustjudge: LLM-as-a-judge evaluation you can trust (the public API, pinned by a test).

Public API::

    from trustjudge import Judge, load_items
    judge = Judge()  # the default judge, llamacpp/qwen2.5-coder-1.5b
    for record in judge.score(load_items("items.jsonl")):
        print(record.scores["trustjudge"])
"""

from ._config import JudgeConfig
from ._judge import Judge, compare, score
from .audit._sample import VerificationSample, verification_sample
from .audit._trust import Calibration
from .backends import DEFAULT_JUDGE, Backend, MockBackend, get_backend, register_backend, register_mock
from .engine._store import Store, default_store_path
from .errors import (
    BackendError,
    ConfigError,
    InputError,
    PrerequisiteError,
    StoreError,
    TransientBackendError,
    TrustJudgeError,
)
from .io._files import iter_items, load_items
from .io._items import Check, Criterion, Item, Pair, Response, Turn, items_from_dicts
from .io._rules import Rule
from .io._sources import read_items
from .io._tables import to_pandas
from .modes._prompts import LabelSet
from .modes._records import ChecklistRecord, CompareRecord, CriteriaRecord, ScoreRecord
from .modes._registry import MODES, Mode, TemplateSpec, get_mode, register_mode, unregister_mode

__all__ = [
    "DEFAULT_JUDGE",
    "Backend",
    "BackendError",
    "Calibration",
    "Check",
    "ChecklistRecord",
    "CompareRecord",
    "ConfigError",
    "CriteriaRecord",
    "Criterion",
    "InputError",
    "Item",
    "Judge",
    "JudgeConfig",
    "LabelSet",
    "MODES",
    "MockBackend",
    "Mode",
    "Pair",
    "PrerequisiteError",
    "Response",
    "Rule",
    "ScoreRecord",
    "Store",
    "StoreError",
    "TemplateSpec",
    "TransientBackendError",
    "TrustJudgeError",
    "Turn",
    "VerificationSample",
    "compare",
    "default_store_path",
    "get_backend",
    "get_mode",
    "items_from_dicts",
    "iter_items",
    "load_items",
    "read_items",
    "register_backend",
    "register_mock",
    "register_mode",
    "score",
    "to_pandas",
    "unregister_mode",
    "verification_sample",
]
