# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/dmacvicar/libvirt" {
  version     = "0.7.6"
  constraints = "0.7.6"
  hashes = [
    "h1:VQAgUF9YO1BvhA5BLv3EYS8LY4gzqGk9DDmBn1DIOrE=",
  ]
}
