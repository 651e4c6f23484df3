variable "trial_id" {
  description = "Trial id (the experiment's record in the harness is kept under it)."
  type        = string
}

variable "experiment" {
  description = "Experiment name, derived from the trial id (hx- and 12 hex digits)."
  type        = string
}

variable "project" {
  description = "CloudLab project the experiment (and a rendered profile) belongs to."
  type        = string
}

variable "profile_script" {
  description = "geni-lib profile script rendered for the task's nodes; empty to use the named profile."
  type        = string
  default     = ""
}

variable "profile_name" {
  description = "Profile to instantiate: the rendered one's name, or a configured one."
  type        = string
}

variable "profile_project" {
  description = "Project of the profile."
  type        = string
}

variable "bindings" {
  description = "Profile parameters (n, hwtype, image for a rendered profile)."
  type        = map(string)
  default     = {}
}

variable "duration" {
  description = "Experiment duration in hours (the harness extends it while the trial runs)."
  type        = number
}

variable "sshpubkey" {
  description = "The harness's public key, for root on every node."
  type        = string
}

variable "python" {
  description = "The harness's Python (runs the in-band BMC account removal at destroy)."
  type        = string
}
