"""Per-game bot adapters: determinization, heuristics, search hooks."""

# first: court_games._form picks the compiled or the interpreted form before a module of this
# package that is compiled with the core (court_games._form.ALSO_COMPILED) is looked for
import court_games  # noqa: F401
