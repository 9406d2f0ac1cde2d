"""Reading a calibration file: bounded in size before it is read, JSON, an object.

A calibration file is trusted input (docs/trust.md), but its size is checked before it is read: a 180 MB file took
1.37 GB of memory and 25 s before it was refused. The limit is :data:`MAX_CALIBRATION_BYTES` (a file of 100,000
labelled units is about 10 MB); ``$TRUSTJUDGE_MAX_CALIBRATION_BYTES`` raises it for every command and the
service, ``Calibration.load(path, max_bytes=...)`` from Python.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io._files import strict_json

MAX_CALIBRATION_BYTES = 64 * 1024 * 1024
"""The largest calibration file read by default."""
LIMIT_ENV = "TRUSTJUDGE_MAX_CALIBRATION_BYTES"
"""The environment variable that sets another limit (a whole number of bytes)."""


def calibration_limit(max_bytes: int | None = None) -> int:
    """``max_bytes`` if given, else ``$TRUSTJUDGE_MAX_CALIBRATION_BYTES``, else :data:`MAX_CALIBRATION_BYTES`."""
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ConfigError(f"the calibration file size limit must be a whole number of bytes >= 1, got "
                              f"{max_bytes!r}")
        return max_bytes
    raw = os.environ.get(LIMIT_ENV)
    if raw is None or not raw.strip():
        return MAX_CALIBRATION_BYTES
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"${LIMIT_ENV} must be a whole number of bytes >= 1, got {raw!r}")
    return value


def read_calibration_file(path: str | Path, max_bytes: int | None = None) -> dict[str, Any]:
    """The JSON object of the calibration file ``path``, refused (a ConfigError naming the file) when it is over
    the size limit (:func:`calibration_limit`; checked before reading, and while reading a pipe), not UTF-8, not
    JSON, or not an object."""
    limit = calibration_limit(max_bytes)
    how = f"${LIMIT_ENV} raises the limit" if max_bytes is None else "max_bytes= raises the limit"
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise ConfigError(f"{path}: the calibration file holds {size:,} bytes, over the limit of {limit:,} "
                                  f"({how})")
            raw = fh.read(limit + 1)
        if len(raw) > limit:  # a pipe or a file that grew: its size was not known before
            raise ConfigError(f"{path}: the calibration file holds more than {limit:,} bytes ({how})")
        data = strict_json(raw.decode("utf-8"), constants=True)  # NaN: refused naming its field
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the calibration file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from None
    except ValueError as exc:  # a duplicate key, an over-long integer, too deep
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a calibration file is a JSON object")
    return data
