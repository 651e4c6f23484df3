#!/bin/bash
# Scored: the agent window's probes were recorded. Unscored: what each phase could reach
# (the test reads these checks); the verifier runs with public egress.
. /tests/targets.env
probe() {
    if timeout 4 bash -c "exec 3<>/dev/tcp/$1/$2 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3" \
        2>/dev/null | grep -qE 'outside|host-service'; then echo true; else echo false; fi
}
dns() {  # a DNS query to the resolver /etc/resolv.conf names gets an answer
    python3 - "$(awk '/^nameserver/ {print $2; exit}' /etc/resolv.conf)" <<'PY'
import socket, struct, sys
q = struct.pack(">6H", 0x4858, 0x0100, 1, 0, 0, 0) + b"\x09localhost\x00" + struct.pack(">2H", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(4)
try:
    s.sendto(q, (sys.argv[1], 53))
    print("true" if s.recvfrom(512)[0][:2] == q[:2] else "false")
except (OSError, IndexError):
    print("false")
PY
}
val() { sed -n "s/^$1=//p" /root/probes.txt 2>/dev/null; }
yes() { [ "$(val "$1")" = yes ] && echo true || echo false; }
recorded=$([ -s /root/probes.txt ] && echo true || echo false)
root_mb=$(df -BM --output=size / | tail -1 | tr -dc 0-9)
storage=$([ "${root_mb:-0}" -ge 8800 ] && echo true || echo false)  # 9G, less ext4 overhead
gateway=$(ip -4 route show default | awk '{print $3; exit}')
cat > /logs/verifier/reward.json <<JSON
{"checks": [
  {"name": "probes recorded", "passed": $recorded},
  {"name": "root filesystem holds the task's storage (9G)", "passed": $storage},
  {"name": "agent reaches outside-a", "passed": $(yes agent_a), "scored": false},
  {"name": "agent reaches outside-b", "passed": $(yes agent_b), "scored": false},
  {"name": "agent reaches host", "passed": $(yes agent_host), "scored": false},
  {"name": "agent reaches gateway", "passed": $(yes agent_gateway), "scored": false},
  {"name": "agent reaches neighbour", "passed": $(yes agent_neighbour), "scored": false},
  {"name": "agent resolves via gateway", "passed": $(yes agent_dns), "scored": false},
  {"name": "verifier reaches outside-a", "passed": $(probe "$OUTSIDE_A" 8080), "scored": false},
  {"name": "verifier reaches outside-b", "passed": $(probe "$OUTSIDE_B" 8080), "scored": false},
  {"name": "verifier reaches host", "passed": $(probe "$HOST_ADDR" "$HOST_PORT"), "scored": false},
  {"name": "verifier reaches gateway", "passed": $(probe "${gateway:-0.0.0.0}" "$HOST_PORT"), "scored": false},
  {"name": "verifier reaches neighbour", "passed": $(probe "$NEIGHBOUR" 8080), "scored": false},
  {"name": "verifier resolves via gateway", "passed": $(dns), "scored": false}
]}
JSON
