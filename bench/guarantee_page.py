"""The page of the guarantee study, results/guarantee.md: bench/guarantee.py's tables and the blocks of the
study's other scripts, each from its results JSON where that exists (so that a full rebuild keeps them all).

    guarantee_ensemble_study.py -> guarantee_ensemble.json   guarantee_reach.py -> guarantee_reach.json
    guarantee_targets.py -> guarantee_targets.json           guarantee_transfer.py -> guarantee_transfer.json
"""

from __future__ import annotations

import json
import math
from typing import Any

from _common import RESULTS
from guarantee_estimators import render as render_estimators
from guarantee_estimators import render_transfer


def _f(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)



def render(res: dict[str, Any]) -> str:
    lines = [f"# Guarantee study ({res['judge']}, zero model calls: everything from the stored judgments)", "",
             f"delta {res['delta']}, {res['splits']} random calibration/test halves per dataset. Judgments the "
             f"store lacked (left out): {res['missing_judgments']}. `cd bench && ../.venv/bin/python guarantee.py`.",
             "", "## Calibration on the test halves", "",
             "| dataset | units | ECE raw | ECE cal | Brier raw | Brier cal | acc raw | acc cal | majority | "
             "kappa raw | kappa cal |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, e in res["datasets"].items():
        s = e.get("study")
        if not s:
            lines.append(f"| {name} | {e.get('labelled_scored_pairs', e.get('labelled_scored_units', 0))} | "
                         "too few judged yet |||||||||")
            continue
        lines.append(f"| {name} | {s['n']} | {_f(s['ece_raw'])} | {_f(s['ece_cal'])} | {_f(s['brier_raw'])} | "
                     f"{_f(s['brier_cal'])} | {_f(s['acc_raw'])} | {_f(s['acc_cal'])} | {_f(s['majority'])} | "
                     f"{_f(s['kappa_raw'])} | {_f(s['kappa_cal'])} |")
    lines += ["", "## Selective verdicts (threshold on the calibration half, measured on the test half)", "",
              "Same set: the calibration map fitted on the calibration half and the threshold tested on the same "
              "half. Split: the map fitted on one half of it, the threshold tested on the other half (the map cannot "
              "have seen the labels its threshold is tested on).", "",
              "| dataset | target | coverage | realised agreement on kept | violation rate (<= 0.1 + MC error) | "
              "split: coverage | split: agreement | split: violation rate |",
              "|---|---|---|---|---|---|---|---|"]
    for name, e in res["datasets"].items():
        for _a, d in (e.get("study") or {}).get("selective", {}).items():
            lines.append(f"| {name} | {d['target']:.1f} | {_f(d['coverage'], '.2f')} | {_f(d['agreement'])} | "
                         f"{_f(d['violation_rate'], '.3f')} (se {d['violation_se']:.3f}) | "
                         f"{_f(d.get('split_coverage'), '.2f')} | {_f(d.get('split_agreement'))} | "
                         f"{_f(d.get('split_violation_rate'), '.3f')} |")
    for name, e in res["datasets"].items():
        if "agreement" in e:
            lines += ["", f"## {name}: agreement with humans by aggregation (label-balanced = mean of both orders)",
                      "", "| method | dataset order | reversed | balanced |", "|---|---|---|---|"]
            for m, d in e["agreement"].items():
                lines.append(f"| {m} | {_f(d['dataset_order'])} | {_f(d['reversed'])} | {_f(d['balanced'])} |")
            lines += ["", f"Position bias (mean log-odds of the first-shown slot): "
                          f"{_f(e['position_bias_logodds'], '+.3f')}. AUROC against agreement: "
                          + ", ".join(f"{k} {_f(v)}" for k, v in e["auroc"].items())
                          + ". Coverage at target 0.8: "
                          + ", ".join(f"{k} {_f(v, '.2f')}" for k, v in e["study"]["coverage_at_alpha_0.2"].items())]
        if "cascade" in e:
            c = e["cascade"]
            lines += ["", "## PandaLM cascade: default judge -> recorded gpt-3.5-turbo -> human", "",
                      f"{c['pairs']} pairs ({c['with_gpt_verdict']} with a gpt-3.5 verdict). Alone, on all of them: "
                      f"default {_f(c['default_alone'])}, gpt-3.5-turbo {_f(c['gpt-3.5-turbo_alone'])}, PandaLM-7B "
                      f"{_f(c['pandalm-7b_alone'])} (a pair without a verdict counts as a disagreement). Both tiers "
                      "are calibrated on the calibration half (gpt-3.5's one-hot verdicts by vector scaling: one "
                      "confidence per verdict class), thresholds by `choose_cascade`, measured on the test half.", "",
                      "| target | decided by default | by gpt-3.5 | left to humans | agreement of machine verdicts | "
                      "gpt-3.5 alone on the test half | gpt-3.5 calls (share of pairs) |",
                      "|---|---|---|---|---|---|---|"]
            for a in (0.2, 0.3):
                d = c[f"alpha_{a}"]
                lines.append(f"| {1 - a:.1f} | {_f(d['tier1_share'], '.2f')} | {_f(d['tier2_share'], '.2f')} | "
                             f"{_f(d['human_share'], '.2f')} | {_f(d['agreement_machine'])} | "
                             f"{_f(d['gpt_alone_on_test'])} | {_f(d['gpt_calls_share'], '.2f')} |")
            for a in (0.2, 0.3):
                d = c[f"alpha_{a}"]
                if d["agreement_machine"] is None:
                    continue
                close = d["agreement_machine"] >= d["gpt_alone_on_test"]
                half = d["gpt_calls_share"] <= 0.5
                lines += ["", f"Target {1 - a:.1f} against the issue's goal (at least as close to humans as "
                              f"gpt-3.5-turbo alone, with at most half its calls): agreement "
                              f"{_f(d['agreement_machine'])} vs {_f(d['gpt_alone_on_test'])} "
                              f"({'met' if close else 'missed'}), gpt-3.5 asked about "
                              f"{_f(d['gpt_calls_share'], '.2f')} of the pairs ({'met' if half else 'missed'})."
                              + ("" if close and half else
                                 f" With {c['pairs'] // 2} calibration pairs the default judge keeps "
                                 f"{_f(d['tier1_share'], '.2f')} of the pairs, and a recorded verdict has only "
                                 "one calibrated confidence per verdict class to sort the rest by.")]
            rj = res.get("recorded_judges", {})
            if rj:
                lines += ["", "Recorded judges: " + "; ".join(
                    f"{who} (`{v['judge']}`): {v['lookups']} verdicts read from the file this run, "
                    f"{v['from_store']} from the store" for who, v in rj.items()) + "."]
        if "cascade_library_run" in e:
            lr = e["cascade_library_run"]
            lines += ["", f"The same cascade through the library (`Judge.calibrate` per tier on one half: "
                          f"{lr['calibration_pairs']} pairs for the default judge, {lr['gpt_calibration_pairs']} "
                          f"for gpt-3.5; `Judge.cascade` on the other half; model calls {lr['model_calls']}):", "",
                      "| target | tier | judge | pairs asked | decided | agreement | pairs alone |",
                      "|---|---|---|---|---|---|---|"]
            for target, run in lr["runs"].items():
                if "refused" in run:
                    lines.append(f"| {target} | - | refused: {run['refused']} |||||")
                    continue
                for t in run["tiers"]:
                    lines.append(f"| {target} | {t['tier']} | {t['judge']} | {t['asked']} | {t['decided']} | "
                                 f"{_f(t.get('agreement'))} | {t['alone']} |")
    lines += render_estimators(res["datasets"])
    from guarantee_ensemble_study import TITLES, result_path, section
    for dataset in TITLES:  # the prompt-ensemble study's blocks (its own script)
        if result_path(dataset).exists():
            lines += section(json.loads(result_path(dataset).read_text()))
    lines += later_blocks("before_transfer")
    lines += render_transfer(res.get("transfer_shift", []))
    lines += later_blocks("after_transfer")
    lines += ["", f"{res['seconds']} s; model calls {res['model_calls']} (the study reads the store only: "
                  f"{res['refused_not_in_store']} judgments not yet in it were left out).", ""]
    return "\n".join(lines)


def later_blocks(where: str) -> list[str]:
    """The other scripts' blocks from their results JSON: the reachability studies before the Transfer block,
    the transfer study's after it."""
    lines: list[str] = []
    if where == "before_transfer":
        if (RESULTS / "guarantee_reach.json").exists():
            from guarantee_reach import section as reach
            lines += reach(json.loads((RESULTS / "guarantee_reach.json").read_text()))
        if (RESULTS / "guarantee_targets.json").exists():
            from guarantee_targets import section as targets
            lines += targets(json.loads((RESULTS / "guarantee_targets.json").read_text()))
    elif (RESULTS / "guarantee_transfer.json").exists():
        from guarantee_transfer import SECOND_FACTUALITY, domain_section, verify_section
        res = json.loads((RESULTS / "guarantee_transfer.json").read_text())
        lines += [*verify_section(res["verification"]), *domain_section(res["per_domain"]), *SECOND_FACTUALITY]
    return lines
