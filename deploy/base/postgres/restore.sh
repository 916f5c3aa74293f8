#!/bin/sh
# Restore Court's databases from backup.sh's dumps in BACKUP_DIR: for each database of
# RESTORE_DATABASES (default: lobby ranking), the dump stamped RESTORE_STAMP (YYYYmmddTHHMMSSZ) or,
# when that is empty, the newest one. Each restore is one transaction (--single-transaction
# --exit-on-error): it lands whole or not at all. Existing objects are dropped first (--clean
# --if-exists), so the target may be the damaged database or a freshly created empty one. Objects
# end up owned by the restoring user (--no-owner). Stop lobby and ranking first (deploy/README.md,
# "Restore the database"). Run by the postgres-restore Job template (backup.yaml).
set -eu
BACKUP_DIR="${BACKUP_DIR:-/backups}"
RESTORE_DATABASES="${RESTORE_DATABASES:-lobby ranking}"
RESTORE_STAMP="${RESTORE_STAMP:-}"
for db in $RESTORE_DATABASES; do
  if [ -n "$RESTORE_STAMP" ]; then
    dump="$BACKUP_DIR/$db-$RESTORE_STAMP.dump"
  else
    dump=$(find "$BACKUP_DIR" -maxdepth 1 -name "$db-*.dump" | sort | tail -n 1)
  fi
  if [ -z "$dump" ] || [ ! -f "$dump" ]; then
    echo "restore: no dump of $db in $BACKUP_DIR${RESTORE_STAMP:+ stamped $RESTORE_STAMP}" >&2
    exit 1
  fi
  echo "restore: $dump -> $db"
  pg_restore --clean --if-exists --no-owner --single-transaction --exit-on-error --dbname="$db" "$dump"
done
echo "restore: done"
