"""Placing trials on many hosts: the hosts file (`hosts`) and the placement policy."""
