"""`bench_cost.py`'s figures, as tables or JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from _cost_report import causes, oracle


def figures(run: Any) -> dict[str, Any]:
    """One side's figures: its bill, its oracle's, its counts and the causes of its breaks."""
    requests = run.requests
    best = oracle(requests)
    per, totals = causes(requests)
    total = sum(r.tokens for r in requests)
    read, written = sum(r.read for r in requests), sum(r.written for r in requests)
    billed = sum(r.billed for r in requests)
    best_billed = sum(o.billed for o in best)
    steps = max(run.steps, 1)
    summary_billed = sum(r.billed for r in requests if r.purpose == "summary")
    return {
        "side": run.side,
        "requests": len(requests),
        "model_steps": run.steps,
        "summary_calls": sum(1 for r in requests if r.purpose == "summary"),
        "child_requests": sum(1 for r in requests if r.purpose == "child"),
        "refused_requests": run.refused,
        "compactions": run.compactions,
        "maskings": totals["masking"].requests if "masking" in totals else 0,
        "masked_results": run.masked_results,
        "input_tokens": total,
        "largest_prompt": max((r.tokens for r in requests), default=0),
        "read_share": read / total if total else 0.0,
        "written_share": written / total if total else 0.0,
        "uncached_share": (total - read - written) / total if total else 0.0,
        "billed": round(billed),
        "billed_per_step": billed / steps,
        "summary_billed": round(summary_billed),
        "oracle_billed": round(best_billed),
        "oracle_per_step": best_billed / steps,
        "oracle_read_share": sum(o.read for o in best) / total if total else 0.0,
        "oracle_written_share": sum(o.written for o in best) / total if total else 0.0,
        "over_oracle": billed / best_billed if best_billed else 0.0,
        "causes": {
            name: {"requests": c.requests, "lost_prefix_tokens": c.lost, "written_tokens": c.written}
            for name, c in sorted(totals.items(), key=lambda item: -item[1].written)
        },
        "per_request": [
            {
                "index": r.index,
                "stream": r.stream,
                "at": r.at,
                "tokens": r.tokens,
                "read": r.read,
                "written": r.written,
                "uncached": r.uncached,
                "billed": round(r.billed),
                "oracle_billed": round(o.billed),
                "break": per[r.index][0],
                "where": per[r.index][1],
                "lost_prefix_tokens": per[r.index][2],
            }
            for r, o in zip(requests, best, strict=True)
        ],
    }


def output(args: argparse.Namespace, runs: list[Any], machine: str, date: str) -> None:
    results = [figures(run) for run in runs]
    settings = {
        "turns": args.turns,
        "window": args.window,
        "threshold": args.threshold,
        "ratio": args.ratio,
        "seed": args.seed,
        "step_seconds": args.step_seconds,
        "think_seconds": args.think_seconds,
        "notepad_position": args.notepad_position,
    }
    if args.json:
        for result in results:
            if not args.requests:
                result.pop("per_request")
        print(json.dumps({"date": date, "machine": machine, "settings": settings, "runs": results}, indent=1))
        return
    print(f"Run of {date} on {machine}.")
    print(
        f"Work: {args.turns} user turns, window {args.window} tokens (threshold {args.threshold}), "
        f"server/cl100k ratio {args.ratio}, seed {args.seed}; {args.step_seconds:g} s per model call, "
        f"{args.think_seconds:g} s before each turn (virtual)."
    )
    print()
    print(
        "| side | model steps | requests (summary, child) | compactions | maskings (results) | "
        "eq-tokens per step | read / written / uncached | oracle per step (read / written) | x oracle |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for f in results:
        print(
            f"| {f['side']} | {f['model_steps']} | {f['requests']} ({f['summary_calls']}, "
            f"{f['child_requests']}) | {f['compactions']} | {f['maskings']} ({f['masked_results']}) | "
            f"{f['billed_per_step']:,.0f} | {f['read_share']:.0%} / {f['written_share']:.0%} / "
            f"{f['uncached_share']:.0%} | {f['oracle_per_step']:,.0f} ({f['oracle_read_share']:.0%} / "
            f"{f['oracle_written_share']:.0%}) | {f['over_oracle']:.2f} |"
        )
    for f in results:
        print()
        print(f"{f['side']}: where a request's prefix parts from its stream's previous request")
        print(
            "| cause | requests | previous requests' tokens after the break | tokens those requests wrote |"
        )
        print("|---|---:|---:|---:|")
        for name, c in f["causes"].items():
            print(f"| {name} | {c['requests']} | {c['lost_prefix_tokens']:,} | {c['written_tokens']:,} |")
        if f["refused_requests"]:
            print(f"({f['refused_requests']} requests refused by the fake, not counted)")
    if args.requests:
        for f in results:
            print()
            print(f"{f['side']}: every request")
            print(
                "| # | stream | t (s) | tokens | read | written | uncached | billed | oracle | "
                "parts from the previous at | cause | tokens after |"
            )
            print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|")
            for r in f["per_request"]:
                print(
                    f"| {r['index']} | {r['stream']} | {r['at']:g} | {r['tokens']:,} | {r['read']:,} | "
                    f"{r['written']:,} | {r['uncached']:,} | {r['billed']:,} | {r['oracle_billed']:,} | "
                    f"{r['where']} | {r['break']} | {r['lost_prefix_tokens']:,} |"
                )
