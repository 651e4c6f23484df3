# Site manifest for the shop's batch cluster (applied locally by puppet-apply.timer).
node default {
  include slurm
}
