output "network" {
  description = "Name of the trial's internal network."
  value       = docker_network.this.name
}

output "nodes" {
  description = "Per node name: the container name (the Ansible/exec host) and its IPv4 address."
  value = {
    for name, c in docker_container.node : name => {
      container = c.name
      ipv4      = local.nodes[name].ipv4
    }
  }
}
