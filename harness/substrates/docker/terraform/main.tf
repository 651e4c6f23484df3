locals {
  prefix = "hx-${var.trial_id}"
  labels = merge(var.extra_labels, {
    "harness.trial"    = var.trial_id
    "harness.campaign" = var.campaign
  })
  nodes = { for n in var.nodes : n.name => n }
}

resource "docker_network" "this" {
  name   = local.prefix
  driver = "bridge"
  # no default route unless some phase of the task has egress (the firewall decides)
  internal = !var.egress

  ipam_config {
    subnet = var.subnet
  }

  # an `hx*` bridge: the harness's nftables table isolates it from the host and other trials
  options = {
    "com.docker.network.bridge.name" = var.bridge_name
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

  must_run      = true
  stop_signal   = var.systemd ? "SIGRTMIN+3" : "SIGTERM"
  memory        = each.value.memory_mb
  memory_swap   = each.value.memory_mb
  cpus          = tostring(each.value.cpus)
  privileged    = false
  cgroupns_mode = "private"
  security_opts = ["no-new-privileges:true"]
  # read by the engine's runtime (hx-runc), which sets the container's pids.max
  env = concat(["HARNESS_PIDS_LIMIT=${var.pids_limit}"], var.env)

  # the harness engine remaps root to an unprivileged host user: these act on the
  # container's own namespaces only (SYS_ADMIN: tmpfs and bind mounts inside it)
  capabilities {
    add = ["NET_ADMIN", "SYS_ADMIN"]
  }

  # memory, charged to the node's memory cgroup (files and inodes alike); sized like
  # systemd's own (/run a quarter of the node's memory, /tmp half), not half the host's RAM
  tmpfs = var.systemd ? merge({
    "/run"      = "rw,exec,size=${max(16, floor(each.value.memory_mb / 4))}m"
    "/run/lock" = "rw,size=8m"
    }, var.tmp_tmpfs ? {
    "/tmp" = "rw,exec,size=${max(16, floor(each.value.memory_mb / 2))}m"
  } : {}) : {}

  # the agent's files (its CLI bundles), read-only, on the node the agent runs on: agent
  # setup links to them instead of copying (a remapped root cannot write the host's files)
  dynamic "volumes" {
    for_each = each.key == var.agent_store_node && var.agent_store_source != "" ? [var.agent_store_source] : []
    content {
      host_path      = volumes.value
      container_path = "/opt/hx-agent/store"
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
