"""The ranking service: the rank-point ledger, antes, challenges, skill ratings and leaderboards."""
