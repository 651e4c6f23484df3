variable "trial_id" {
  description = "Trial id; every resource name starts with hx-<trial_id> and carries it as a label."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_.-]*$", var.trial_id))
    error_message = "trial_id must be lowercase letters, digits, '.', '_' or '-'."
  }
}

variable "campaign" {
  description = "Campaign id, stored as the harness.campaign label on every resource."
  type        = string
}

variable "image" {
  description = "Local image (name or sha256 id) every node boots from; never pulled."
  type        = string
}

variable "subnet" {
  description = "CIDR of the trial's internal network, e.g. 10.213.7.0/24."
  type        = string
}

variable "nodes" {
  description = "Nodes of the trial: name, fixed IPv4 address on the trial network, CPU and memory limits."
  type = list(object({
    name      = string
    ipv4      = string
    cpus      = number
    memory_mb = number
  }))
}

variable "bridge_name" {
  description = "Linux bridge of the trial network: `hxd-` + 10 hex digits (at most 15 characters; the harness firewall matches `hx*`)."
  type        = string

  validation {
    condition     = can(regex("^hx[a-z0-9-]{1,13}$", var.bridge_name))
    error_message = "bridge_name must start with hx and have at most 15 characters (letters, digits, dashes)."
  }
}

variable "pids_limit" {
  description = "Most processes (and threads) a node may run at once (pids cgroup, set by the engine's runtime)."
  type        = number
  default     = 4096

  validation {
    condition     = var.pids_limit >= 64 && var.pids_limit <= 1048576
    error_message = "pids_limit must be between 64 and 1048576."
  }
}

variable "systemd" {
  description = "Run systemd as PID 1 (tmpfs /run, /run/lock and /tmp; the engine hands the container its own systemd cgroup)."
  type        = bool
  default     = true
}

variable "tmp_tmpfs" {
  description = "Mount a tmpfs at /tmp (with systemd); false keeps the image's /tmp (Harbor tasks)."
  type        = bool
  default     = true
}

variable "env" {
  description = "Extra NAME=value environment variables of every node (Harbor's [environment.env])."
  type        = list(string)
  default     = []
}

variable "extra_labels" {
  description = "Additional labels for every resource."
  type        = map(string)
  default     = {}
}

variable "egress" {
  description = "Give nodes a default route via the bridge (a task network mode other than no-network in some phase); the harness firewall's egress sets decide what leaves."
  type        = bool
  default     = false
}

variable "agent_store_node" {
  description = "The node that mounts agent_store_source read-only at /opt/hx-agent/store (the agent's node)."
  type        = string
  default     = ""
}

variable "agent_store_source" {
  description = "A directory of the engine's machine holding the agent's files (its CLI bundles); empty: none is mounted."
  type        = string
  default     = ""
}
