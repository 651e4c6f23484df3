output "nodes" {
  description = "Node name -> the SSH address of its machine."
  value       = { for m in var.machines : m.node => m.address }
  depends_on  = [terraform_data.lease]
}

output "machines" {
  description = "Node name -> the pool machine it runs on."
  value       = { for m in var.machines : m.node => m.machine }
}

output "network" {
  description = "Where the nodes are: the pool their machines belong to."
  value       = { pool = var.pool }
}
