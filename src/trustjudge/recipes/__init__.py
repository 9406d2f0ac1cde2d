"""Benchmarks' judging protocols as shipped, versioned recipe files, with the metric of each (layer 7).


``trustjudge recipes`` lists them; ``trustjudge run RECIPE ITEMS`` judges the items as the recipe says and prints
the benchmark's headline metric with a bootstrap interval over items (docs/benchmarks.md). In Python::

    from trustjudge.recipes import get_recipe, recipe_judge, run_recipe
    recipe = get_recipe("dit")
    run = run_recipe(recipe, items, recipe_judge(recipe, "llamacpp/smollm2"))
    run.result.value, run.result.overall.ci
"""

from ._metrics import METRICS, Metric, MetricResult, compute, get_metric, register_metric
from ._recipe import PLUGIN_GROUP, Recipe, builtin_recipes, get_recipe, load_recipe, recipe_names
from ._run import RecipeRun, audit_recipe, recipe_judge, run_recipe

__all__ = ["METRICS", "PLUGIN_GROUP", "Metric", "MetricResult", "Recipe", "RecipeRun", "audit_recipe",
           "builtin_recipes", "compute", "get_metric", "get_recipe", "load_recipe", "recipe_judge", "recipe_names",
           "register_metric", "run_recipe"]
