"""Bare-metal machines, whichever substrate leases them: pools (`pool.py`), exclusive
leases and quarantine (`lease.py`), resets between trials (`reset.py`), the harness's and
the task's BMC accounts (`accounts.py`), the emulated pool of QEMU machines with ipmi_sim
BMCs (`emulate.py`, `emulated_machine.py`, `booted.py`), and the substrate class the
`baremetal` and `cloudlab` folders share (`substrate.py`). Neutral: no substrate folder is
imported here.
"""
