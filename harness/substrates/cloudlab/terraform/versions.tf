terraform {
  required_version = ">= 1.5"
  required_providers {
    cloudlab = {
      source  = "harness/cloudlab"
      version = "0.1.0"
    }
  }
}
