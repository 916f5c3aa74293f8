"""Hearts: the engine (``engine``) and the fast mutable model the bots search on (``fast``)."""
