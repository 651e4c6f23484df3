#!/bin/bash
set -euo pipefail
ssh -o BatchMode=yes root@node1 'echo ok > /root/ready'
