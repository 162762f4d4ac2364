#!/bin/sh
# Makes this deployment's secrets, once, into the folder given (docker-compose.yml's `secrets` service writes them to
# a volume of their own; test/integration/compose-mosquitto.test.ts runs this very script): each a random 256-bit hex
# string, so nothing that works is committed, and kept on later starts.
#   admin-token               the bridge's admin token (ADMIN_TOKEN_FILE): `docker compose exec bridge cat /run/secrets/admin-token`
#   mqtt-bridge-password      the bridge's Mosquitto password (user `bridge`, on the bridge's own listener 1884)
#   mqtt-device-password      the devices' Mosquitto password (user `device`, on listener 1883)
#   mosquitto-bridge-passwd   Mosquitto's password files (hashed, made with mosquitto_passwd) for the two listeners
#   mosquitto-devices-passwd
set -eu
dir="${1:?usage: init-secrets.sh DIR}"
umask 022
mkdir -p "$dir"
# Readable by the containers' users (the bridge runs as uid 1000, Mosquitto as its own): compose without swarm mounts
# files with their own permissions. The volume is mounted into those two services only.
new() {
  if [ ! -s "$dir/$1" ]; then
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/$1.tmp"
    mv "$dir/$1.tmp" "$dir/$1"
  fi
}
new admin-token
new mqtt-bridge-password
new mqtt-device-password
# Made anew on every start from the passwords above (a password file holds salted hashes only).
rm -f "$dir/mosquitto-bridge-passwd" "$dir/mosquitto-devices-passwd"
touch "$dir/mosquitto-bridge-passwd" "$dir/mosquitto-devices-passwd"
mosquitto_passwd -b "$dir/mosquitto-bridge-passwd" bridge "$(cat "$dir/mqtt-bridge-password")"
mosquitto_passwd -b "$dir/mosquitto-devices-passwd" device "$(cat "$dir/mqtt-device-password")"
chmod 0644 "$dir"/*
