"""One module per game; see court_games.core for the shared interface."""
