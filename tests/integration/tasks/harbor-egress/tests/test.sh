#!/bin/bash
# Scored: solve.sh ran in WORKDIR with [solution.env]; [verifier.env] is exported here.
# Unscored: what each phase could reach (the test reads these checks).
. /tests/targets.env
probe() {
    if timeout 4 bash -c "exec 3<>/dev/tcp/$1/$2 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3" \
        2>/dev/null | grep -qE 'outside|host-service'; then echo true; else echo false; fi
}
val() { sed -n "s/^$1=//p" /app/result.txt 2>/dev/null; }
yes() { [ "$(val "$1")" = yes ] && echo true || echo false; }
in_workdir=$([ -f /app/result.txt ] && [ ! -f /solution/result.txt ] && echo true || echo false)
greeting=$([ "$(val greeting)" = "$EXPECTED" ] && echo true || echo false)
verifier_env=$([ "${EXPECTED:-}" = "hello from solution.env" ] && echo true || echo false)
cat > /logs/verifier/reward.json <<JSON
{"checks": [
  {"name": "solve.sh ran in WORKDIR", "passed": $in_workdir},
  {"name": "solution.env exported", "passed": $greeting},
  {"name": "verifier.env exported", "passed": $verifier_env},
  {"name": "agent reaches outside-a", "passed": $(yes agent_a), "scored": false},
  {"name": "agent reaches outside-b", "passed": $(yes agent_b), "scored": false},
  {"name": "agent reaches host", "passed": $(yes agent_host), "scored": false},
  {"name": "agent reaches neighbour", "passed": $(yes agent_neighbour), "scored": false},
  {"name": "verifier reaches outside-a", "passed": $(probe "$OUTSIDE_A" 8080), "scored": false},
  {"name": "verifier reaches outside-b", "passed": $(probe "$OUTSIDE_B" 8080), "scored": false},
  {"name": "verifier reaches host", "passed": $(probe "$HOST_ADDR" "$HOST_PORT"), "scored": false},
  {"name": "verifier reaches neighbour", "passed": $(probe "$NEIGHBOUR" 8080), "scored": false}
]}
JSON
