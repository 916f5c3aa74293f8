"""Per-game bot adapters: determinization, heuristics, search hooks."""
