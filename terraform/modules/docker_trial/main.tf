locals {
  prefix = "hx-${var.trial_id}"
  labels = merge(var.extra_labels, {
    "harness.trial"    = var.trial_id
    "harness.campaign" = var.campaign
  })
  nodes = { for n in var.nodes : n.name => n }
}

resource "docker_network" "this" {
  name     = local.prefix
  driver   = "bridge"
  internal = true

  ipam_config {
    subnet = var.subnet
  }

  dynamic "labels" {
    for_each = local.labels
    content {
      label = labels.key
      value = labels.value
    }
  }
}

resource "docker_container" "node" {
  for_each = local.nodes

  name     = "${local.prefix}-${each.key}"
  hostname = each.key
  image    = var.image

  must_run    = true
  stop_signal = var.systemd ? "SIGRTMIN+3" : "SIGTERM"
  memory      = each.value.memory_mb
  cpu_shares  = floor(each.value.cpus * 1024)
  privileged  = false

  capabilities {
    add = var.systemd ? ["NET_ADMIN", "SYS_ADMIN"] : ["NET_ADMIN"]
  }

  tmpfs = var.systemd ? { "/run" = "rw,exec", "/run/lock" = "rw", "/tmp" = "rw,exec" } : {}

  dynamic "volumes" {
    for_each = var.systemd ? [1] : []
    content {
      host_path      = "/sys/fs/cgroup"
      container_path = "/sys/fs/cgroup"
      read_only      = true
    }
  }

  networks_advanced {
    name         = docker_network.this.id
    aliases      = [each.key]
    ipv4_address = each.value.ipv4
  }

  dynamic "labels" {
    for_each = merge(local.labels, { "harness.node" = each.key })
    content {
      label = labels.key
      value = labels.value
    }
  }
}
