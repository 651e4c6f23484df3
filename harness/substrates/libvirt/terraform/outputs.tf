output "nodes" {
  description = "Node name -> IPv4 address on the trial network (the address SSH uses)."
  value       = { for name, n in local.nodes : name => n.ip }
}

output "domains" {
  description = "Node name -> libvirt domain name."
  value       = { for name, d in libvirt_domain.this : name => d.name }
}

output "network" {
  description = "Name and bridge of the isolated trial network."
  value       = { name = libvirt_network.this.name, bridge = var.bridge_name, cidr = var.cidr }
}

output "console_logs" {
  description = "Node name -> serial console log file."
  value       = { for name, n in local.nodes : name => n.console_log }
}

output "bmc_address" {
  description = "Host-side address of the trial bridge: where the nodes reach the virtual BMCs."
  value       = cidrhost(var.cidr, 1)
}
