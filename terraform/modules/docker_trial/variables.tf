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

variable "systemd" {
  description = "Run systemd as PID 1 (SYS_ADMIN, tmpfs /run, read-only cgroupfs)."
  type        = bool
  default     = true
}

variable "extra_labels" {
  description = "Additional labels for every resource."
  type        = map(string)
  default     = {}
}
