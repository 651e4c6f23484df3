"""The external tools the harness drives: Terraform and Ansible."""
