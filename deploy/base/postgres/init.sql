-- Court: one database per service that keeps SQL state, both owned by POSTGRES_USER ("court").
-- Run once, by the official image's entrypoint, when the data directory is first initialised.
-- docker-compose.yml mounts this same file.
CREATE DATABASE lobby;
CREATE DATABASE ranking;
