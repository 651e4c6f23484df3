"""The Ray executor (extra `ray`): `driver.py` (the `campaign apply` side), `node.py` and
`trial_main.py` (a worker node's side), `ship.py` (trial directories back into the run
dir, exactly once). Only `driver.py` imports Ray at import time."""
