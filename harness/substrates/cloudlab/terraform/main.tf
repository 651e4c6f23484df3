# One trial = one CloudLab experiment. The profile is the geni-lib script the harness
# rendered from the task's nodes (or a configured profile); the experiment is created and
# polled until ready, and terminated at destroy. Before that, the in-band BMC accounts the
# harness made on the nodes for the trial are removed (terraform_data.bmc_accounts is
# destroyed first: it depends on the experiment).
resource "cloudlab_profile" "trial" {
  count   = var.profile_script == "" ? 0 : 1
  name    = var.profile_name
  project = var.profile_project
  script  = var.profile_script
}

# The harness's record of the experiment (written before apply: the quota ledger and what
# gc reads) goes once the experiment is gone: the experiment depends on it, so destroy
# removes the experiment first.
resource "terraform_data" "record" {
  input = {
    python     = var.python
    experiment = var.experiment
  }

  provisioner "local-exec" {
    when    = destroy
    command = "'${self.input.python}' -W ignore::RuntimeWarning -m harness.substrates.cloudlab.experiments forget '${self.input.experiment}'"
  }
}

resource "cloudlab_experiment" "trial" {
  depends_on = [terraform_data.record]

  name            = var.experiment
  project         = var.project
  profile_name    = var.profile_script == "" ? var.profile_name : cloudlab_profile.trial[0].name
  profile_project = var.profile_project
  bindings        = var.bindings
  duration        = var.duration
  sshpubkey       = var.sshpubkey
}

resource "terraform_data" "bmc_accounts" {
  input = {
    python = var.python
    trial  = var.trial_id
    nodes  = jsonencode([for n in cloudlab_experiment.trial.nodes : { host = n.ssh_host, port = n.ssh_port, user = n.ssh_user }])
  }

  provisioner "local-exec" {
    when    = destroy
    command = "'${self.input.python}' -W ignore::RuntimeWarning -m harness.substrates.cloudlab.inband forget --trial '${self.input.trial}' --nodes '${self.input.nodes}'"
  }
}
