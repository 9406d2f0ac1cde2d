"""The tries of llama.cpp label scoring: a label set's token trie, the prompts' prefix trie, and the
log-softmax of one row of logits (pure functions over token ids; :mod:`._llamacpp` decodes them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_Entry = tuple[int, int, tuple[int, ...], bool]
"""One token of a decode: token id, position, the sequences it belongs to, whether its logits are read."""


class _LabelTree:
    """The token trie of a label set: the nodes whose next-token distribution is needed, and its leaves.

    A node is a proper prefix of some label's tokens. Each leaf (a node with no node below it) gets its own
    llama.cpp sequence, and a node belongs to the sequences of the leaves below it.
    """

    def __init__(self, label_ids: list[tuple[int, ...]]) -> None:
        self.label_ids = label_ids
        self.nodes = sorted({seq[:j] for seq in label_ids for j in range(1, len(seq))})
        has_child = {node[:-1] for node in self.nodes}
        leaves = [node for node in self.nodes if node not in has_child]
        self.n_seqs = max(1, len(leaves))
        self.node_leaves = [tuple(k for k, leaf in enumerate(leaves) if leaf[: len(node)] == node)
                            for node in self.nodes]


def _prompt_trie(order: Sequence[int], prompts: list[list[int]], shared: int,
                 ) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """The distinct (token, position) nodes of the prompts' tokens after ``shared``, as a prefix trie.

    Nodes are numbered in creation order (a parent before its children, the first prompt's nodes first
    and consecutive); ``paths[k]`` lists the nodes of ``prompts[order[k]]``, one per token.
    """
    children: dict[tuple[int, int], int] = {}
    nodes: list[tuple[int, int]] = []
    paths: list[list[int]] = []
    for i in order:
        ids, parent, path = prompts[i], -1, []
        for pos in range(shared, len(ids)):
            node = children.get((parent, ids[pos]))
            if node is None:
                node = children[(parent, ids[pos])] = len(nodes)
                nodes.append((ids[pos], pos))
            path.append(node)
            parent = node
        paths.append(path)
    return nodes, paths


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-softmax of one row of logits, in float64 (the sums of label log-probabilities stay exact)."""
    x: np.ndarray = logits.astype(np.float64)
    x -= x.max()
    out: np.ndarray = x - np.log(np.exp(x).sum())
    return out
