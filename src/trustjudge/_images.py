"""Images as inputs: an item's pictures, its reference figures and what a response drew.

An image is given as a local path (relative to the items file), a ``data:`` URI (base64) or an ``http(s)`` URL
(for servers that fetch it themselves). Paths and data URIs are read here and checked with Pillow: a format
of :data:`FORMATS`, at most :data:`MAX_IMAGE_BYTES` bytes and :data:`MAX_IMAGE_PIXELS` pixels (the size is read
from the header before anything is decoded, so a decompression bomb is refused unopened), and the whole image
decodes. Each is known by the SHA-256 of its bytes (a URL by the SHA-256 of its text: the server's fetch is
not ours to check).

A prompt holds an image as a marker, :func:`marker` (two private-use characters around ``image`` and the
digest): the prompt string, so every store key built from it, covers the image's bytes, and a backend that
reads images finds them where the template put them (:func:`split`). The bytes are looked up by digest among
the images loaded in this process (held while the items holding them are alive).

Pillow is imported on first use (a text-only run never loads it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import threading
import urllib.parse
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import InputError

FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp", "BMP": "image/bmp"}
"""The formats an image may have (Pillow's names) and their media types."""
MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""The largest image file (or decoded data URI) read."""
MAX_IMAGE_PIXELS = 40_000_000
"""The most pixels (width x height) an image may have: more is refused before decoding (a decompression bomb
of a few kilobytes can declare billions)."""
MAX_IMAGES = 64
"""The most images one field may list."""

Sources = Literal["any", "data"]
"""Where images may come from: ``any`` (paths, data URIs, URLs) or ``data`` (data URIs only: the service)."""

_OPEN, _CLOSE = "\ue000", "\ue001"
MARKER = re.compile(f"{_OPEN}image ((?:sha256|url):[0-9a-f]{{64}}){_CLOSE}")
"""An image's place in a prompt (:func:`marker`)."""


@dataclass(frozen=True)
class Image:
    """One image, read and checked (:func:`load_image`); compared by its digest."""

    source: str = field(compare=False)
    """Where it came from, as given (a data URI shortened to its head)."""
    digest: str
    """``sha256:<hex>`` of its bytes; ``url:<hex>`` (SHA-256 of the URL) for a URL not read here."""
    media_type: str = field(compare=False)
    width: int | None = field(default=None, compare=False)
    height: int | None = field(default=None, compare=False)
    data: bytes | None = field(default=None, compare=False, repr=False)
    """The file's bytes (``None`` for a URL)."""
    url: str | None = field(default=None, compare=False)
    """The http(s) URL of an image a server fetches itself."""

    def as_url(self) -> str:
        """What a chat API's ``image_url`` takes: the URL, or the bytes as a base64 ``data:`` URI."""
        if self.url is not None:
            return self.url
        assert self.data is not None
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode('ascii')}"

    def pil(self) -> Any:
        """The image as an RGB ``PIL.Image`` (a URL cannot be: it was never read here)."""
        if self.data is None:
            raise InputError(f"image {self.source} is a URL, which only a server that fetches it can read; "
                             "give the file or a data: URI to judge it in process")
        from PIL import Image as PILImage

        with PILImage.open(io.BytesIO(self.data)) as im:
            return im.convert("RGB")

    def to_dict(self) -> dict[str, Any]:
        """What a record says of the image: its source and digest."""
        return {"source": self.source, "digest": self.digest}


_KNOWN: weakref.WeakValueDictionary[str, Image] = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


def _known(image: Image) -> Image:
    with _LOCK:
        held = _KNOWN.get(image.digest)
        if held is None:
            _KNOWN[image.digest] = image
            return image
        return held


def marker(image: Image) -> str:
    """The text that stands for ``image`` in a prompt."""
    return f"{_OPEN}image {image.digest}{_CLOSE}"


def images_block(images: tuple[Image, ...]) -> str:
    """A template's ``${..._images}`` field: each image's marker on its own line (empty without images)."""
    return "".join("\n" + marker(im) for im in images)


def has_images(prompt: str) -> bool:
    return _OPEN in prompt and MARKER.search(prompt) is not None


def lookup(digest: str) -> Image:
    """The loaded image with ``digest``; :class:`KeyError` when none is (the items holding it are gone)."""
    with _LOCK:
        found = _KNOWN.get(digest)
    if found is None:
        raise KeyError(digest)
    return found


def split(prompt: str) -> list[str | Image]:
    """``prompt`` as texts and images in order (no empty texts). Raises :class:`KeyError` for a marker whose
    image is not loaded."""
    out: list[str | Image] = []
    pos = 0
    for m in MARKER.finditer(prompt):
        if m.start() > pos:
            out.append(prompt[pos:m.start()])
        out.append(lookup(m.group(1)))
        pos = m.end()
    if pos < len(prompt):
        out.append(prompt[pos:])
    return out


def unmark(prompt: str, replacement: str = "") -> str:
    """``prompt`` with each image marker replaced (token counts of the text alone)."""
    return MARKER.sub(replacement, prompt)


def _shown(value: str) -> str:
    return value if len(value) <= 60 else value[:40] + "..."


def _check(data: bytes, source: str, where: str) -> Image:
    """``data`` as an :class:`Image`, checked: size, format, pixels (before decoding), a full decode."""
    if len(data) > MAX_IMAGE_BYTES:
        raise InputError(f"image {_shown(source)} is {len(data):,} bytes (limit {MAX_IMAGE_BYTES:,})", field=where)
    import warnings

    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PILImage.DecompressionBombWarning)
            with PILImage.open(io.BytesIO(data)) as im:
                fmt = im.format or "?"
                width, height = im.size
                if fmt not in FORMATS:
                    raise InputError(f"image {_shown(source)} is {fmt}, not one of {', '.join(FORMATS)}", field=where)
                if width * height > MAX_IMAGE_PIXELS:
                    raise InputError(f"image {_shown(source)} declares {width}x{height} pixels (limit "
                                     f"{MAX_IMAGE_PIXELS:,}): refused as a possible decompression bomb", field=where)
                im.load()
    except InputError:
        raise
    except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning) as exc:
        raise InputError(f"image {_shown(source)} refused as a decompression bomb ({exc})", field=where) from None
    except UnidentifiedImageError:
        raise InputError(f"{_shown(source)} is not an image Pillow can read (formats: {', '.join(FORMATS)})",
                         field=where) from None
    except (OSError, ValueError, SyntaxError) as exc:  # truncated or corrupt data
        raise InputError(f"image {_shown(source)} is corrupt: {exc}", field=where) from None
    return _known(Image(source, "sha256:" + hashlib.sha256(data).hexdigest(), FORMATS[fmt], width, height, data))


def image_from_bytes(data: bytes, source: str, where: str = "image") -> Image:
    """An image from bytes in memory (a file a sandboxed script wrote), checked as a file's are."""
    return _check(data, source, where)


def _data_uri(value: str, where: str) -> Image:
    head, comma, payload = value.partition(",")
    if not comma or not head.endswith(";base64") or not head[5:].startswith("image/"):
        raise InputError(f"a data URI must be data:image/<type>;base64,<data>, got {_shown(value)}", field=where)
    if len(payload) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise InputError(f"data URI of {len(payload):,} characters (an image is at most {MAX_IMAGE_BYTES:,} bytes)",
                         field=where)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InputError(f"data URI is not valid base64 ({exc})", field=where) from None
    return _check(data, head + ",...", where)


def load_image(value: Any, where: str, *, base: Path | None = None, sources: Sources = "any") -> Image:
    """One image as an items file gives it (``where`` names the field in errors; ``base``: the folder that
    relative paths start from, default the working folder).

    Raises:
        InputError: not a string; a path that is missing or not a file; a URL or path where ``sources`` is
            ``data``; a bad data URI; an image too large, of another format, corrupt, or a decompression bomb.
    """
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"an image is a path, a data: URI or an http(s) URL, got {type(value).__name__}",
                         field=where)
    value = value.strip()
    if value.startswith("data:"):
        return _data_uri(value, where)
    if sources == "data":
        raise InputError(f"images here are data: URIs only (no paths or URLs), got {_shown(value)}", field=where)
    if value.startswith(("http://", "https://")):
        parsed = urllib.parse.urlsplit(value)
        if not parsed.netloc:
            raise InputError(f"not a URL: {_shown(value)}", field=where)
        digest = "url:" + hashlib.sha256(value.encode("utf-8")).hexdigest()
        return _known(Image(value, digest, "image/*", url=value))
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise InputError(f"image {value} is not a file", field=where)
        if size > MAX_IMAGE_BYTES:
            raise InputError(f"image {value} is {size:,} bytes (limit {MAX_IMAGE_BYTES:,})", field=where)
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"image {value} not found (paths are relative to the items file)", field=where) from None
    except OSError as exc:
        raise InputError(f"cannot read image {value}: {exc.strerror or exc}", field=where) from None
    return _check(data, value, where)


__all__ = ["FORMATS", "MARKER", "MAX_IMAGES", "MAX_IMAGE_BYTES", "MAX_IMAGE_PIXELS", "Image", "Sources",
           "has_images", "image_from_bytes", "images_block", "load_image", "lookup", "marker", "split", "unmark"]
