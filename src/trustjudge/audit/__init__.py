"""Audits over stored records: statistics, consistency, agreement, ranking, calibration (layer 3).

Nothing here imports a mode: audits read records (dataclasses or dicts) and distributions.
"""
