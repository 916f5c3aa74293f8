from alembic import context
from court_lobby.models import metadata
from court_store import run_env

run_env(context, metadata)
