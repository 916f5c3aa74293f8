"""Court's terminal client (``court``) and the local stack launcher (``court stack up``, what
``make run`` runs). Built on court_client: a plain gRPC client of the services."""
