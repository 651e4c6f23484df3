"""The libvirt hypervisor, whichever substrate runs guests on it: connections, power,
leftovers and the KVM probe (`host.py`), the Debian guest image and its kernel (`image.py`,
`guest/`), the names of a trial's libvirt objects (`naming.py`), and a daemon's URI as a
hosts file gives it (`endpoint.py`). The `vm` and `vm-cluster` substrates (`libvirt/`) and
the emulated bare-metal pool (`metal/`) use it. Neutral: no substrate folder is imported
here.
"""
