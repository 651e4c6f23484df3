#!/bin/bash
set -euo pipefail
mkdir -p /srv/hello
printf 'Hello, harness!\n' > /srv/hello/greeting.txt
chown root:root /srv/hello/greeting.txt
chmod 0644 /srv/hello/greeting.txt
