"""Queen's Court: the engine (``engine``), the fast mutable model the bots search on (``fast``) and
the ranking's accounting of a finished game (``accounting``)."""
