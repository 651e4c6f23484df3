#!/bin/bash
# Heal every fault recorded on this node, newest first, then remove what the harness owns
# by name: nft tables hx_*, root qdiscs with an hx handle (48xx:), hx-* device-mapper
# devices, hx-* systemd units, hx-*.conf drop-ins and hx-fill-* files.
# Usage: sweep.sh [heal|list]. One line per finding: "fault ID NAME", "healed ID NAME",
# "failed ID NAME", "artifact WHAT" (list) or "removed WHAT" (heal).
set -uo pipefail
export LC_ALL=C
mode=${1:-heal}
state=/var/lib/harness/faults
ledger=/run/harness/faults
verb=removed
[ "$mode" = list ] && verb=artifact

name_of() {
  sed -n 's/.*"fault": *"\([^"]*\)".*/\1/p' "$1" 2>/dev/null | head -n 1
}

ids=$(
  for d in "$state"/*/; do
    [ -d "$d" ] || continue
    id=$(basename "$d")
    printf '%s %s\n' "$(cat "$d/created" 2>/dev/null || echo 0)" "$id"
  done | sort -rn | awk '{print $2}'
)
for f in "$ledger"/*.json; do
  [ -f "$f" ] || continue
  id=$(basename "$f" .json)
  [ -d "$state/$id" ] || ids="$ids $id"
done
for id in $ids; do
  fault=$(name_of "$state/$id/record.json")
  [ -n "$fault" ] || fault=$(name_of "$ledger/$id.json")
  if [ "$mode" = list ]; then
    echo "fault $id ${fault:-unknown}"
  elif [ -f "$state/$id/heal.sh" ] && bash "$state/$id/heal.sh" >/dev/null 2>&1; then
    echo "healed $id ${fault:-unknown}"
  elif [ -f "$state/$id/heal.sh" ]; then
    echo "failed $id ${fault:-unknown}"
  else
    rm -f "$ledger/$id.json"
    echo "$verb ledger entry $id without a heal script"
  fi
done

if command -v nft >/dev/null; then
  for t in $(nft list tables 2>/dev/null | awk '$2 == "inet" && $3 ~ /^hx_/ {print $3}'); do
    [ "$mode" = list ] || nft delete table inet "$t"
    echo "$verb nft table inet $t"
  done
fi
for dev in $(ls /sys/class/net 2>/dev/null); do
  if tc qdisc show dev "$dev" root 2>/dev/null | grep -Eq '^qdisc [a-z_]+ 48[0-9a-f]{2}: '; then
    [ "$mode" = list ] || tc qdisc del dev "$dev" root
    echo "$verb tc root qdisc on $dev"
  fi
done
if command -v dmsetup >/dev/null; then
  for dm in $(dmsetup ls 2>/dev/null | awk '$1 ~ /^hx-/ {print $1}'); do
    if [ "$mode" != list ]; then
      for m in $(findmnt -rn -o TARGET -S "/dev/mapper/$dm" 2>/dev/null); do umount -l "$m"; done
      dmsetup remove --force "$dm" 2>/dev/null
    fi
    echo "$verb dm device $dm"
  done
fi
for u in $(systemctl list-units --all --plain --no-legend 'hx-*' 2>/dev/null | awk '$3 != "inactive" {print $1}'); do
  [ "$mode" = list ] || { systemctl stop "$u" 2>/dev/null; systemctl reset-failed "$u" 2>/dev/null; }
  echo "$verb unit $u"
done
reload=false
for f in /run/systemd/system/*.d/hx-*.conf /etc/systemd/system/*.d/hx-*.conf; do
  [ -f "$f" ] || continue
  [ "$mode" = list ] || { rm -f "$f"; reload=true; }
  echo "$verb drop-in $f"
done
$reload && systemctl daemon-reload
for m in $(findmnt -rn -o TARGET,FSTYPE | awk '$2 !~ /^(proc|sysfs|cgroup2?|devpts|devtmpfs|mqueue|securityfs|debugfs|tracefs|pstore|bpf|configfs|fusectl|hugetlbfs|autofs|binfmt_misc|nsfs)$/ {print $1}' | sort -u); do
  while IFS= read -r f; do
    [ -n "$f" ] || continue
    [ "$mode" = list ] || rm -f "$f"
    echo "$verb fill file $f"
  done < <(find "$m" -xdev -maxdepth 4 -name 'hx-fill-*' -type f 2>/dev/null)
done
# removals on disk now: a hard power-off right after must not bring them back
[ "$mode" = list ] || sync
exit 0
