"""Label distributions from an OpenAI-compatible server's log-probabilities.

Everything goes through the legacy completions endpoint (``/v1/completions``: a chat endpoint cannot
continue the ``Score: [`` prefix, so the label position would be unknown):

- **exact** (:func:`exact_labels`): prompt + label is sent with ``echo: true, logprobs: 1, max_tokens: 1``
  and the label's log-probability is the sum over its echoed tokens (:func:`echo_label_logprob`). The
  capability is *detected*, not assumed (:func:`probe_echo`): the real prompt is sent once without echo
  (greedy token ``g`` and its log-probability) and once as prompt + ``g`` with echo; echo is trusted only if
  the echoed log-probability of ``g`` matches. This catches servers that echo misaligned log-probabilities
  (llama-cpp-python shifts them by one token when the model adds no BOS token) or none at all (the C++
  ``llama-server`` returns generated-token log-probabilities only). :func:`probe_lists` finds whether the
  server takes several prompts in one request.
- **top_k** fallback (:func:`top_k_labels`): the top-``k`` log-probabilities at the label position
  (``logprobs: k``, ``max_tokens: 1``). Multi-token labels walk the label trie with one extra request per
  label prefix that appeared in the top-``k`` (``"5"`` in the top-k at the label position, then
  ``"57"`` ...). A label whose tokens are not all in the top-``k`` along its path gets probability 0
  (log-probability ``-inf``): the engine reports the covered mass as ``label_mass``. Token strings
  are matched as text, so when several tokenizations of a label appear, their probabilities add up.

The probe retries too (through the :class:`~trustjudge.backends._openai_http.Channel`), so a fault in transit
is not mistaken for a server without echo.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import BackendError, BackendUnavailable, TransientBackendError
from ._base import LabelRequest, LabelResult
from ._openai_http import Channel, MalformedResponse, ServerError, json_object


class Malformed(Exception):
    """A response that parsed as JSON but lacks what the request asked for."""


def logsumexp(values: Iterable[float]) -> float:
    vals = [v for v in values if v != -math.inf]
    if not vals:
        return -math.inf
    top = max(vals)
    return top + math.log(sum(math.exp(v - top) for v in vals))


def echo_label_logprob(choice: Mapping[str, Any], sent: str, label: str) -> tuple[float, int]:
    """Sum the echoed log-probabilities of ``label``'s tokens at the end of the sent prompt.

    The label's tokens are found from the end of the echoed entries by their text, not by
    ``text_offset``: servers disagree on offsets (llama-cpp-python leaves special tokens out of them).
    Returns the log-probability and the number of prompt entries before the label.
    """
    lp = choice.get("logprobs")
    if not isinstance(lp, Mapping):
        raise Malformed("no logprobs in the echoed choice")
    tokens, values = lp.get("tokens"), lp.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
        raise Malformed("logprobs without matching tokens and token_logprobs")
    text = choice.get("text")
    if not isinstance(text, str) or not text.startswith(sent):
        raise Malformed("the echoed text does not start with the prompt")
    generated = text[len(sent):]
    # Entries of generated tokens come last; drop them so that the prompt's entries end with the label.
    if generated:
        acc, n_gen = "", 0
        while n_gen < len(tokens) and len(acc) < len(generated):
            n_gen += 1
            acc = str(tokens[-n_gen]) + acc
        if acc != generated:
            raise Malformed("cannot find the generated token among the echoed entries")
    else:  # an end-of-sequence token: some servers list it (as "" or its name), others leave it out
        n_gen = 0 if tokens and str(tokens[-1]) and label.endswith(str(tokens[-1])) else 1
    end = len(tokens) - n_gen
    acc, k = "", 0
    while end - k > 0 and len(acc) < len(label):
        k += 1
        acc = str(tokens[end - k]) + acc
    if acc != label:
        raise Malformed(f"the label {label!r} does not end the echoed prompt at a token boundary (got {acc!r})")
    picked = values[end - k: end]
    if any(not isinstance(v, (int, float)) for v in picked):
        raise Malformed("a label token has no log-probability")
    return float(sum(picked)), end - k


def probe_echo(http: Channel, prompt: str) -> tuple[bool, str]:
    """Check that echoed prompt log-probabilities are present and aligned, on a real prompt."""
    def greedy() -> tuple[float, Any]:
        first = http.complete({"prompt": prompt, "max_tokens": 1, "temperature": 0.0, "logprobs": 1})
        choice = first["choices"][0]
        lp = choice.get("logprobs") if isinstance(choice, dict) else None
        values = lp.get("token_logprobs") if isinstance(lp, dict) else None
        if not isinstance(values, list) or not values or not isinstance(values[0], (int, float)):
            raise MalformedResponse(f"{http.base_url}/completions returned no logprobs: label scoring "
                                    "needs them")
        return float(values[0]), choice.get("text") if isinstance(choice, dict) else None

    want, token = http.retrying(greedy)
    if not isinstance(token, str) or not token:
        return False, "probe inconclusive (the greedy continuation is an end token)"

    def echo() -> float:
        echoed = http.complete({"prompt": prompt + token, "max_tokens": 1, "temperature": 0.0,
                                "logprobs": 1, "echo": True})
        try:
            return echo_label_logprob(echoed["choices"][0], prompt + token, token)[0]
        except Malformed as exc:  # retried: a fault in transit looks the same as no support
            raise MalformedResponse(f"echo unsupported: {exc}") from exc

    try:
        got = http.retrying(echo)
    except ServerError as exc:
        # The plain request just worked, so a 500 here is the server failing on echo, not an outage.
        if exc.status not in (500, 501):
            raise
        return False, f"echo request failed: {exc}"
    except MalformedResponse as exc:
        return False, str(exc)
    except (TransientBackendError, BackendUnavailable):
        raise
    except BackendError as exc:
        return False, f"echo unsupported: {exc}"
    # Same distribution computed twice; only batch-shape rounding may differ. A misaligned echo
    # reports another position's probability, off by far more than this.
    if abs(got - want) > 0.05:
        return False, f"echoed log-probabilities are misaligned ({got:.4f} vs {want:.4f})"
    return True, "echo logprobs verified"


def probe_lists(http: Channel) -> bool:
    """Whether the server takes several prompts in one request. HTTP 500/501 (llama-cpp-python asserts a
    single prompt) is read as "no" at once, not retried: the single-prompt requests before it just worked."""
    def once() -> Any:
        try:
            return http.complete({"prompt": ["1", "2"], "max_tokens": 1, "temperature": 0.0})
        except ServerError as exc:
            if exc.status in (500, 501):
                return None
            raise

    try:
        data = http.retrying(once)
    except BackendUnavailable:
        raise
    except BackendError:
        return False
    return isinstance(data, dict) and len(data["choices"]) == 2


def exact_labels(http: Channel, requests: Sequence[LabelRequest], size: int) -> list[LabelResult]:
    start = time.perf_counter()
    # Prompt-major order: requests in flight share their prompt, so the server's prefix cache serves them.
    texts = [(i, j, req.prompt + label) for i, req in enumerate(requests) for j, label in enumerate(req.labels)]
    chunks = [texts[k:k + size] for k in range(0, len(texts), size)]

    def once(chunk: list[tuple[int, int, str]]) -> list[tuple[float, int]]:
        prompt: str | list[str] = [t for _, _, t in chunk] if size > 1 else chunk[0][2]
        data = http.complete({"prompt": prompt, "max_tokens": 1, "temperature": 0.0,
                              "logprobs": 1, "echo": True})
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
        if len(choices) != len(chunk):
            raise TransientBackendError(f"{http.base_url}/completions returned {len(choices)} choices for "
                                        f"{len(chunk)} prompts")
        read = []
        for (i, j, text), choice in zip(chunk, choices):
            try:
                read.append(echo_label_logprob(choice, text, requests[i].labels[j]))
            except Malformed as exc:
                raise MalformedResponse(f"{http.base_url}: cannot read label {requests[i].labels[j]!r}: "
                                        f"{exc}") from exc
        return read

    values: list[list[float]] = [[0.0] * len(r.labels) for r in requests]
    prompt_tokens = [0] * len(requests)
    for chunk, read in zip(chunks, http.map(lambda c: http.retrying(lambda: once(c)), chunks)):
        for (i, j, _), (value, before) in zip(chunk, read):
            values[i][j] = value
            prompt_tokens[i] = before
    latency = (time.perf_counter() - start) / len(requests)
    return [LabelResult(tuple(v), n, latency, "exact") for v, n in zip(values, prompt_tokens)]


Fetch = Callable[[str], tuple[dict[str, float], int]]
"""``fetch(prefix)``: the top-k log-probabilities (token text -> log-probability) at the position after the
prompt + ``prefix``, and the prompt's tokens as the server counted them."""


def walk_top_k(labels: Sequence[str], fetch: Fetch, http: Channel) -> tuple[tuple[float, ...], int]:
    """Every label's log-probability from top-k log-probabilities, walking the label trie: the position
    after each label prefix that appeared in the top-k is fetched (``fetch``, on the channel's pool), so a
    label outside the top-k at any step gets ``-inf``. Returns the values and the prompt's tokens."""
    dists: dict[str, dict[str, float]] = {}
    prompt_tokens = 0
    frontier = [""]
    budget = 1 + sum(len(label) for label in labels)  # at most one request per label prefix
    while frontier:
        if len(dists) + len(frontier) > budget:
            raise BackendError(f"top-k label walk exceeded {budget} requests")
        found = http.map(lambda p: (p, *http.retrying(lambda: fetch(p))), frontier)
        nxt: set[str] = set()
        for prefix, dist, used in found:
            dists[prefix] = dist
            if prefix == "":
                prompt_tokens = used
            for token in dist:
                longer = prefix + token
                if token and longer not in dists and any(
                        lab.startswith(longer) and len(lab) > len(longer) for lab in labels):
                    nxt.add(longer)
        frontier = sorted(nxt)
    return trie_values(labels, dists), prompt_tokens


def trie_values(labels: Sequence[str], dists: Mapping[str, Mapping[str, float]],
                assume: str | None = None) -> tuple[float, ...]:
    """Each label's log-probability from ``dists`` (label prefix -> the top-k at the position after it):
    the sum over the token paths that spell the label. ``assume`` (the closing bracket): a position whose
    top-k is unknown is taken to write it with certainty when it is all that is left of the label (the
    chat path that sees the first position only); without it such a label gets ``-inf``."""
    memo: dict[tuple[str, str], float] = {}

    def value(label: str, prefix: str) -> float:
        key = (label, prefix)
        if key not in memo:
            if prefix not in dists:
                memo[key] = 0.0 if assume is not None and label[len(prefix):] == assume else -math.inf
                return memo[key]
            terms = []
            for token, lp in dists[prefix].items():
                longer = prefix + token
                if token and label.startswith(longer):
                    terms.append(lp if longer == label else lp + value(label, longer))
            memo[key] = logsumexp(terms)
        return memo[key]

    return tuple(value(label, "") for label in labels)


def top_k_labels(http: Channel, req: LabelRequest, top_k: int) -> LabelResult:
    start = time.perf_counter()

    def fetch(prefix: str) -> tuple[dict[str, float], int]:
        data = http.complete({"prompt": req.prompt + prefix, "max_tokens": 1, "temperature": 0.0,
                              "logprobs": top_k})
        choice = data["choices"][0]
        lp = choice.get("logprobs") if isinstance(choice, dict) else None
        tops = lp.get("top_logprobs") if isinstance(lp, dict) else None
        if not isinstance(tops, list) or not tops or not isinstance(tops[0], dict):
            raise TransientBackendError(f"{http.base_url}/completions returned no top_logprobs")
        usage = json_object(data.get("usage"))
        dist = {str(t): float(v) for t, v in tops[0].items() if isinstance(v, (int, float))}
        return dist, int(usage.get("prompt_tokens") or 0)

    values, prompt_tokens = walk_top_k(req.labels, fetch, http)
    return LabelResult(values, prompt_tokens, time.perf_counter() - start, "top_k")


__all__ = ["Fetch", "Malformed", "echo_label_logprob", "exact_labels", "logsumexp", "probe_echo", "probe_lists",
           "top_k_labels", "trie_values", "walk_top_k"]
