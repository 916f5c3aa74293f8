"""The bot service (``court-bot``): computer players for the ``bot:<level>`` seats, and hints.

* ``turns``: a durable JetStream pull consumer shared by every replica takes each public game
  record (court.events.v2; a turn when a bot seat is to act) once; for a bot seat the service reads that seat's view from the rules service with its
  own bot identity, decides with ``court_bots.choose`` and submits the move with a request id
  derived from (game id, seq, seat), so a redelivered turn never plays twice.
* ``servicer``: ``court.bot.v1.BotService/Suggest``, the move a level would make from the
  caller's own view (read from the rules service with the caller's token).
* ``decide``: levels, adapters, time budgets and the decision metrics.
* ``app``: settings, the process, graceful shutdown.
"""
