"""The lobby service: accounts, lobbies, seats, ante checks, starting, saving and resuming games."""
