# MW-2291: throttle queue-worker while the spool disk is migrated
[Service]
LimitNOFILE=48
