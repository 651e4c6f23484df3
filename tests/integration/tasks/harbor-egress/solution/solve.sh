#!/bin/bash
# Runs in the image WORKDIR (/app) as Harbor runs it; GREETING comes from [solution.env].
set -euo pipefail
. /solution/targets.env
probe() {  # probe ADDR: "yes" when the HTTP server there answers "outside"
    if timeout 4 bash -c "exec 3<>/dev/tcp/$1/$2 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3" \
        2>/dev/null | grep -qE 'outside|host-service'; then echo yes; else echo no; fi
}
{
    echo "greeting=${GREETING:-unset}"
    echo "agent_a=$(probe "$OUTSIDE_A" 8080)"
    echo "agent_b=$(probe "$OUTSIDE_B" 8080)"
    echo "agent_host=$(probe "$HOST_ADDR" "$HOST_PORT")"
    echo "agent_neighbour=$(probe "$NEIGHBOUR" 8080)"
} > result.txt
