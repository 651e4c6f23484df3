#!/bin/bash
# The oracle, in the agent window (allowlist: outside-a only, no DNS).
set -euo pipefail
. /solution/targets.env
probe() {  # probe ADDR PORT: "yes" when the HTTP server there answers
    if timeout 4 bash -c "exec 3<>/dev/tcp/$1/$2 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3" \
        2>/dev/null | grep -qE 'outside|host-service'; then echo yes; else echo no; fi
}
dns() {  # dns SERVER: "yes" when a DNS query to SERVER gets an answer
    python3 - "$1" <<'PY'
import socket, struct, sys
q = struct.pack(">6H", 0x4858, 0x0100, 1, 0, 0, 0) + b"\x09localhost\x00" + struct.pack(">2H", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(4)
try:
    s.sendto(q, (sys.argv[1], 53))
    print("yes" if s.recvfrom(512)[0][:2] == q[:2] else "no")
except OSError:
    print("no")
PY
}
gateway=$(ip -4 route show default | awk '{print $3; exit}')
{
    echo "agent_a=$(probe "$OUTSIDE_A" 8080)"
    echo "agent_b=$(probe "$OUTSIDE_B" 8080)"
    echo "agent_host=$(probe "$HOST_ADDR" "$HOST_PORT")"
    echo "agent_gateway=$(probe "${gateway:-0.0.0.0}" "$HOST_PORT")"
    echo "agent_neighbour=$(probe "$NEIGHBOUR" 8080)"
    echo "agent_dns=$(dns "${gateway:-0.0.0.0}")"
} > /root/probes.txt
