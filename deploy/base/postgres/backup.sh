#!/bin/sh
# Back up Court's databases: one pg_dump (custom format, compressed) per database into BACKUP_DIR,
# named DB-YYYYmmddTHHMMSSZ.dump, checked readable with pg_restore --list, written under a temporary
# name and renamed, so a file with the .dump suffix is always complete; dumps older than
# BACKUP_KEEP_DAYS days are deleted afterwards. The connection comes from the libpq variables
# (PGHOST, PGPORT, PGUSER, PGPASSWORD). Run by the postgres-backup CronJob (deploy/base/postgres/
# backup.yaml); tests/deploy/test_backup_restore.py runs this very file against a real server.
set -eu
BACKUP_DIR="${BACKUP_DIR:-/backups}"
BACKUP_DATABASES="${BACKUP_DATABASES:-lobby ranking}"
BACKUP_KEEP_DAYS="${BACKUP_KEEP_DAYS:-14}"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$BACKUP_DIR"
for db in $BACKUP_DATABASES; do
  out="$BACKUP_DIR/$db-$stamp.dump"
  pg_dump --format=custom --compress=6 --dbname="$db" --file="$out.partial"
  pg_restore --list "$out.partial" > /dev/null
  mv "$out.partial" "$out"
  echo "backup: $db -> $out ($(wc -c < "$out") bytes)"
done
find "$BACKUP_DIR" -maxdepth 1 -name '*.dump' -mtime +"$BACKUP_KEEP_DAYS" -print -delete | sed 's/^/backup: pruned /'
find "$BACKUP_DIR" -maxdepth 1 -name '*.dump.partial' -mmin +60 -delete
