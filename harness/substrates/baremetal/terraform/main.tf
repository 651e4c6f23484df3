# One trial on leased machines of a bare-metal pool. Nothing is created: each node is a
# lease the harness took before apply; Terraform checks it at create and, at destroy,
# resets the machine (the pool's reset: reimage, power-cycle or none, with the harness's
# own files removed, its BMC's accounts restored) and releases the lease. A machine whose
# BMC then refuses the harness is quarantined and released; a reset that fails otherwise
# keeps the lease (stale): `harness gc` retries it.
resource "terraform_data" "lease" {
  for_each = { for m in var.machines : m.node => m }

  input = {
    pool    = var.pool
    trial   = var.trial_id
    machine = each.value.machine
    python  = var.python
  }

  provisioner "local-exec" {
    command = "'${var.python}' -W ignore::RuntimeWarning -m harness.substrates.metal.lease check --pool '${var.pool}' --trial '${var.trial_id}' --machine '${each.value.machine}'"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "'${self.input.python}' -W ignore::RuntimeWarning -m harness.substrates.metal.reset release --pool '${self.input.pool}' --trial '${self.input.trial}' --machine '${self.input.machine}'"
  }
}
