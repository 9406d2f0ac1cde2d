"""Items in and records out: the data model, files, dataset adapters and outputs (layer 1).

``_items`` defines items, responses, criteria and checks and reads item files (errors name file, line and
field); ``_adapters`` reads the public datasets; ``_frames`` converts to and from pandas/Parquet;
``_outputs`` writes output files atomically.
"""
