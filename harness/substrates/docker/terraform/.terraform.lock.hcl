# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/kreuzwerker/docker" {
  version     = "4.6.0"
  constraints = ">= 3.0.0"
  hashes = [
    "h1:dNyDOqE0CLTYda0t5yYak3ZkR+UoY5RenmZrxvpnPcM=",
  ]
}
