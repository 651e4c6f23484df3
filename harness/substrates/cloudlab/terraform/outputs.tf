output "nodes" {
  description = "The experiment's nodes: client_id, hostname, ipv4, ssh_host, ssh_port, ssh_user."
  value       = cloudlab_experiment.trial.nodes
}

output "network" {
  description = "Where the nodes are: the experiment (id, name, project, status, url, expires_at)."
  value = {
    id         = cloudlab_experiment.trial.id
    name       = cloudlab_experiment.trial.name
    project    = var.project
    status     = cloudlab_experiment.trial.status
    url        = cloudlab_experiment.trial.url
    expires_at = cloudlab_experiment.trial.expires_at
  }
}
