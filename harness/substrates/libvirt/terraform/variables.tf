variable "trial_id" {
  description = "Trial id; every libvirt object and disk is named hx-<trial_id>[-<node>]."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,62}$", var.trial_id))
    error_message = "trial_id must be lowercase letters, digits and dashes (at most 63)."
  }
}

variable "campaign" {
  description = "Campaign the trial belongs to; recorded in each domain's description."
  type        = string
  default     = ""
}

variable "owner" {
  description = "Owner tag (host:pid:start@boot) of the harness process running the trial, recorded in each domain's description: `harness gc` spares trials whose owner is alive (empty = none)."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^[A-Za-z0-9._@:-]*$", var.owner))
    error_message = "owner must be a host:pid:start@boot tag."
  }
}

variable "libvirt_uri" {
  description = "libvirt connection URI."
  type        = string
  default     = "qemu:///system"
}

variable "bridge_name" {
  description = "Linux bridge of the trial network (at most 15 characters, derived from a hash of the trial id by the harness)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9-]{1,15}$", var.bridge_name))
    error_message = "bridge_name must be 1-15 lowercase letters, digits or dashes."
  }
}

variable "cidr" {
  description = "IPv4 subnet of the isolated trial network; the host bridge takes .1, nodes .10 upwards."
  type        = string
  default     = "10.213.0.0/24"

  validation {
    condition     = can(cidrhost(var.cidr, 16)) && !strcontains(var.cidr, ":")
    error_message = "cidr must be an IPv4 subnet with room for at least 16 hosts."
  }
}

variable "network_mode" {
  description = "libvirt forward mode of the trial network: none (isolated: libvirt's own rules reject forwarding) or open (no libvirt rules; the harness firewall decides, per phase, what a task with egress may reach)."
  type        = string
  default     = "none"

  validation {
    condition     = contains(["none", "open"], var.network_mode)
    error_message = "network_mode must be none or open."
  }
}

variable "domain_type" {
  description = "libvirt domain type: kvm when /dev/kvm really works, else qemu (TCG)."
  type        = string
  default     = "qemu"

  validation {
    condition     = contains(["kvm", "qemu"], var.domain_type)
    error_message = "domain_type must be kvm or qemu."
  }
}

variable "base_image" {
  description = "Absolute path of the cached base qcow2; each node boots a qcow2 overlay on it."
  type        = string
}

variable "kernel" {
  description = "Absolute path of the kernel booted directly (the base image's vmlinuz)."
  type        = string
}

variable "initrd" {
  description = "Absolute path of the initramfs matching the kernel."
  type        = string
}

variable "kernel_cmdline" {
  description = "Extra kernel arguments (key = value; key \"_\" holds space-separated keyless words), merged over root=/dev/vda console=ttyS0 panic=10 module_blacklist=(unused drivers) and the keyless rw (no fsck: overlays are fresh per trial)."
  type        = map(string)
  default     = {}
}

variable "disk_dir" {
  description = "Absolute directory (in the trial dir; on the libvirt host when host_ssh is set) of the trial's storage pool: per-node overlays, seed and data disks only."
  type        = string
}

variable "console_log_dir" {
  description = "Absolute directory (in the trial dir; on the libvirt host when host_ssh is set) for the per-node serial console logs."
  type        = string
}

variable "record_dir" {
  description = "Absolute local directory (in the trial dir) for the per-node start records; default: console_log_dir."
  type        = string
  default     = ""
}

variable "host_ssh" {
  description = "Empty when the libvirt host is this machine; else its SSH login as JSON (harness.substrates.libvirt.remote.RemoteHost): the disks are made and removed there, under disk_dir on that host."
  type        = string
  default     = ""
}

variable "ssh_public_key" {
  description = "The per-trial public key installed as root's authorized_keys on every node."
  type        = string
}

variable "nodes" {
  description = "Nodes by name, in order (the first is the primary). ip and mac default to cidrhost(cidr, 10 + index) and a MAC derived from the trial and node; data_disks_mb adds blank qcow2 data disks (vdc, vdd, ...) of those sizes; root_mb (0: the base image's size) grows the root disk; start is snapshot (restore a booted template of the node's shape, cold when that fails) or cold."
  type = list(object({
    name          = string
    vcpu          = optional(number, 1)
    memory_mb     = optional(number, 1024)
    ip            = optional(string)
    mac           = optional(string)
    data_disks_mb = optional(list(number), [])
    root_mb       = optional(number, 0)
    start         = optional(string, "snapshot")
  }))

  validation {
    condition     = length(var.nodes) > 0 && alltrue([for n in var.nodes : can(regex("^[a-z][a-z0-9-]{0,30}$", n.name)) && contains(["snapshot", "cold"], n.start)])
    error_message = "nodes must be non-empty; names are lowercase hostnames (letters, digits, dashes); start is snapshot or cold."
  }
}

variable "bmc_nodes" {
  description = "Nodes that get a virtual BMC (IPMI lanplus on the trial bridge's host address, per-trial UDP port); their configs with credentials are written by the harness under <trial_root>/vm/bmc/<node>.json."
  type        = list(string)
  default     = []
}

variable "trial_root" {
  description = "Absolute trial directory (BMC configs, pid files and logs live in <trial_root>/vm/bmc). Required when bmc_nodes is not empty."
  type        = string
  default     = ""
}

variable "python" {
  description = "Python interpreter with the harness installed; runs the virtual BMCs."
  type        = string
  default     = "python3"
}

variable "start_timeout" {
  description = "Seconds a node may take to start (a template boot included when its snapshot is built first)."
  type        = number
  default     = 300
}
