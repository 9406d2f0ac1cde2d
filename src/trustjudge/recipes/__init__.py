"""Benchmarks' judging protocols as shipped, versioned recipe files, with the metric of each (layer 7).


``trustjudge recipes`` lists them; ``trustjudge run RECIPE ITEMS`` judges the items as the recipe says and prints
the benchmark's headline metric with a bootstrap interval over items (docs/benchmarks.md). In Python::

    from trustjudge.recipes import get_recipe, recipe_judge, run_recipe
    recipe = get_recipe("dit")
    run = run_recipe(recipe, items, recipe_judge(recipe, "llamacpp/smollm2"))
    run.result.value, run.result.overall.ci       # the published reading; run.readings: hard and soft

A benchmark's released file: ``read_benchmark(path, "omnispatial")``; its own prompt from a checkout:
``with_benchmark_prompt(recipe, load_benchmark_prompt(recipe, "path/to/OmniSpatial"))``.
"""

from . import _metrics_bench as _metrics_bench  # registers PuzzleWorld's and LiveDRBench's own formulas
from . import _pqr as _pqr  # registers PQR's citation_coverage metric
from . import _vision as _vision  # registers the metrics of the recipes that judge images
from ._metrics import METRICS, Metric, MetricResult, compute, get_metric, register_metric
from ._prompt import BenchmarkPrompt, load_benchmark_prompt
from ._readers import READERS, read_benchmark
from ._recipe import PLUGIN_GROUP, Recipe, builtin_recipes, get_recipe, load_recipe, recipe_names, with_benchmark_prompt
from ._run import RecipeRun, audit_recipe, prepare_items, recipe_judge, run_recipe

__all__ = ["METRICS", "PLUGIN_GROUP", "READERS", "BenchmarkPrompt", "Metric", "MetricResult", "Recipe", "RecipeRun",
           "audit_recipe", "builtin_recipes", "compute", "get_metric", "get_recipe", "load_benchmark_prompt",
           "load_recipe", "prepare_items", "read_benchmark", "recipe_judge", "recipe_names", "register_metric",
           "run_recipe", "with_benchmark_prompt"]
