#!/bin/bash
# Every node: Redis listens on the network (protected mode off: no password by design),
# replicas get a persistent `replicaof node0 6379`, each Sentinel monitors `shop` at node0
# (names resolved and announced) instead of the packaged `mymaster` at 127.0.0.1.
set -euo pipefail
for n in node0 node1 node2; do
  ssh $n "set -e
    sed -i -e 's/^bind .*/bind * -::*/' -e 's/^protected-mode .*/protected-mode no/' /etc/redis/redis.conf
    sed -i '/^replicaof /d' /etc/redis/redis.conf
    [ $n = node0 ] || echo 'replicaof node0 6379' >> /etc/redis/redis.conf
    systemctl stop redis-sentinel
    cat > /etc/redis/sentinel.conf <<CONF
port 26379
daemonize no
pidfile /run/sentinel/redis-sentinel.pid
logfile /var/log/redis/redis-sentinel.log
dir /var/lib/redis
protected-mode no
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip $n
sentinel monitor shop node0 6379 2
sentinel down-after-milliseconds shop 5000
sentinel failover-timeout shop 30000
sentinel parallel-syncs shop 1
CONF
    chown redis:redis /etc/redis/sentinel.conf && chmod 0640 /etc/redis/sentinel.conf
    systemctl enable --quiet redis-server redis-sentinel
    systemctl restart redis-server" </dev/null
done
for n in node0 node1 node2; do ssh -n $n systemctl start redis-sentinel; done
for _ in $(seq 40); do
  ok=0
  for n in node0 node1 node2; do
    redis-cli -h $n -p 26379 sentinel master shop 2>/dev/null | grep -A1 -x num-other-sentinels | tail -1 | grep -qx 2 && ok=$((ok + 1))
  done
  [ $ok = 3 ] && [ "$(redis-cli -h node0 info replication | tr -d '\r' | grep connected_slaves)" = connected_slaves:2 ] && exit 0
  sleep 1
done
exit 1
