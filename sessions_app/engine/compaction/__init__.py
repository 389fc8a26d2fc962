"""Compaction (seed 002; DESIGN.md, "Compaction keeps the live work"): keeping every request of a
session inside its context window. One module per concern; import the module you need.

- `budget`: what fits the window (the threshold, the headroom kept for the estimate's error,
  `fit_limit`, `output_room`, the calibrated estimate of the next request, a user message's
  estimate; `ContextWindowTooSmall` when what must be sent does not fit);
- `tiers`: the `Compactor`, which runs the tiers before every model call (mask old results, warn
  and summarize, mask the running turn's older results), and `message_admit`, which refuses a
  user message that cannot fit whatever the tiers do;
- `masking`: the cheap tier, tool results replaced by placeholders (kept whole by a feature's
  result store);
- `summary`: the summary call (the history as a transcript, in chunks when it is large);
- `scripted`: the scripted model's rules for it (it summarizes, and answers the warning).

What compaction stores (archives, the warning, masks, failures) is `services.archives`'s.
"""
