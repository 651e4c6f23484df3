"""Load the inventory's connection plugins once, in the ansible-playbook process.

Ansible runs every task in a worker forked from the playbook process and loads the
task's connection plugin there; a plugin the parent never loaded is imported again by
every worker. For `community.docker.docker_api` (the Docker SDK it vendors, requests,
...) that import costs about 0.1 s per task, even for `debug` or argument validation.
Loading the plugins named in `HARNESS_ANSIBLE_PRELOAD` (comma-separated) when this
callback is created, before any worker is forked, lets every worker inherit them.
Nothing is printed and nothing else changes; a plugin that fails to load is left to the
worker, which reports the error as before.
"""

from __future__ import annotations

import os

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import connection_loader

DOCUMENTATION = """
    name: harness_preload
    type: aggregate
    short_description: preload connection plugins before workers fork
    description:
      - Loads the connection plugins named in HARNESS_ANSIBLE_PRELOAD in the playbook process.
    requirements:
      - enable in configuration
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "harness_preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in filter(None, os.environ.get("HARNESS_ANSIBLE_PRELOAD", "").split(",")):
            try:
                connection_loader.get(name.strip(), class_only=True)
            except Exception:  # the worker loads it again and reports any error
                pass
