"""Asking, storing and reading judgments; the maths of label distributions (layer 2, no mode).

``_engine`` plans, batches and caches label questions over a backend; ``_store`` keeps every model output
(SQLite, explicit migrations); ``_store_io`` exports and imports it; ``_asking`` runs the direct and cot
protocols; ``_scoring`` and ``_aggregates`` are the maths of label distributions (expected scores,
likelihood-aware verdicts, Poisson-binomial aggregates).
"""
