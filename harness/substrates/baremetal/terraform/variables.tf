variable "trial_id" {
  description = "Trial id (leases are recorded under it)."
  type        = string
}

variable "campaign" {
  description = "Campaign name (informational)."
  type        = string
}

variable "owner" {
  description = "Owner tag of the harness process (host:pid:start@boot)."
  type        = string
}

variable "pool" {
  description = "Pool name: $HARNESS_HOME/pools/<pool>.yaml."
  type        = string
}

variable "python" {
  description = "The harness's Python (runs the lease check and the reset-and-release)."
  type        = string
}

variable "machines" {
  description = "Task node -> the pool machine leased for it (by the harness, before apply) and its SSH address."
  type = list(object({
    node    = string
    machine = string
    address = string
  }))

  validation {
    condition     = length(var.machines) > 0
    error_message = "machines must not be empty."
  }
}
