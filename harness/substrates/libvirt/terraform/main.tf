provider "libvirt" {
  uri = var.libvirt_uri
}

locals {
  prefix     = "hx-${var.trial_id}"
  record_dir = coalesce(var.record_dir, var.console_log_dir) # start records, fetched logs: here
  nodes = {
    for i, n in var.nodes : n.name => {
      index       = i
      vcpu        = n.vcpu
      memory_mb   = n.memory_mb
      ip          = coalesce(n.ip, cidrhost(var.cidr, 10 + i))
      mac         = upper(coalesce(n.mac, join(":", concat(["52", "54", "00"], regexall("..", substr(md5("${var.trial_id}/${n.name}"), 0, 6))))))
      domain      = "${local.prefix}-${n.name}"
      overlay     = "${var.disk_dir}/${local.prefix}-${n.name}.qcow2"
      seed        = "${var.disk_dir}/${local.prefix}-${n.name}-seed.img"
      data        = [for j, mb in n.data_disks_mb : { path = "${var.disk_dir}/${local.prefix}-${n.name}-data${j}.qcow2", mb = mb }]
      console_log = "${var.console_log_dir}/${local.prefix}-${n.name}-console.log"
      start       = n.start
      data_mb     = n.data_disks_mb
      root_mb     = n.root_mb
    }
  }
  hosts_file   = join("", concat(["127.0.0.1\tlocalhost\n"], [for name, n in local.nodes : "${n.ip}\t${name}\n"]))
  cluster_info = join("", [for name, n in local.nodes : "${name}=${n.ip}\n${name}_cluster_ip=${n.ip}\n"])
  # module_blacklist: the same list as harness/substrates/hypervisor/image.py MODULE_BLACKLIST
  cmdline_args = merge({
    root             = "/dev/vda", console = "ttyS0", panic = "10", _ = "rw",
    module_blacklist = "kvm,kvm_amd,kvm_intel,ccp,cfg80211,rfkill,drm,floppy,usbcore,usb_common,uhci_hcd,ehci_hcd,pcspkr,psmouse,serio_raw,i2c_piix4,efi_pstore,virtio_balloon",
  }, var.kernel_cmdline)
  # the shape the provider reads back: one map of key=value, then one of keyless words
  cmdline = concat(
    [{ for k, v in local.cmdline_args : k => v if k != "_" }],
    contains(keys(local.cmdline_args), "_") ? [{ _ = local.cmdline_args["_"] }] : [],
  )
}

resource "libvirt_network" "this" {
  name      = local.prefix
  mode      = var.network_mode
  bridge    = var.bridge_name
  addresses = [var.cidr]
  autostart = false

  dhcp {
    enabled = true
  }

  dns {
    enabled    = true
    local_only = true
  }

  xml {
    xslt = templatefile("${path.module}/files/network.xsl.tftpl", {
      hosts = [for name, n in local.nodes : { mac = n.mac, name = name, ip = n.ip }]
    })
  }
}

resource "libvirt_pool" "this" {
  name = local.prefix
  type = "dir"
  path = var.disk_dir
}

resource "terraform_data" "disks" {
  for_each = local.nodes

  input = {
    overlay  = each.value.overlay
    seed     = each.value.seed
    data     = [for d in each.value.data : d.path]
    host_ssh = var.host_ssh
    python   = var.python
    # on another machine's libvirt: its console log comes back into the trial dir first
    fetch = var.host_ssh == "" ? "" : "${each.value.console_log} ${local.record_dir}/${basename(each.value.console_log)}"
  }
  triggers_replace = [var.base_image, var.ssh_public_key, local.hosts_file, each.value.data, each.value.root_mb]

  provisioner "local-exec" {
    command = var.host_ssh == "" ? "${path.module}/files/make-disks.sh" : "'${var.python}' -m harness.substrates.libvirt.remote script '${path.module}/files/make-disks.sh'"
    environment = {
      HX_SSH             = var.host_ssh
      HX_BASE            = var.base_image
      HX_OVERLAY         = each.value.overlay
      HX_SEED            = each.value.seed
      HX_HOSTNAME        = each.key
      HX_HOSTS           = local.hosts_file
      HX_CLUSTER_INFO    = local.cluster_info
      HX_AUTHORIZED_KEYS = var.ssh_public_key
      HX_URI             = var.libvirt_uri
      HX_POOL            = libvirt_pool.this.name
      HX_DATA            = join("", [for d in each.value.data : "${d.path} ${d.mb}\n"])
      HX_ROOT_MB         = each.value.root_mb
    }
  }

  provisioner "local-exec" {
    when = destroy
    # the files are the lines of $HX_FILES; removed here, or on the libvirt host (host_ssh,
    # after copying the console log of $HX_FETCH back)
    command = (self.input.host_ssh == "" ? "printf \"%s\\n\" \"$HX_FILES\" | xargs -r -d \"\\n\" rm -f --"
    : "'${self.input.python}' -m harness.substrates.libvirt.remote clean")
    environment = {
      HX_SSH   = self.input.host_ssh
      HX_FETCH = self.input.fetch
      HX_FILES = join("\n", concat([self.input.overlay, self.input.seed], self.input.data))
    }
  }
}

resource "libvirt_domain" "this" {
  for_each = local.nodes

  name        = each.value.domain
  description = "harness trial=${var.trial_id} campaign=${var.campaign} node=${each.key} owner=${var.owner} root=${urlencode(var.trial_root)}"
  type        = var.domain_type
  vcpu        = each.value.vcpu
  memory      = each.value.memory_mb
  kernel      = var.kernel
  initrd      = var.initrd
  cmdline     = local.cmdline
  running     = false # started by terraform_data.start: from a snapshot, else cold
  autostart   = false

  dynamic "cpu" {
    for_each = var.domain_type == "kvm" ? [1] : []
    content {
      mode = "host-passthrough"
    }
  }

  disk {
    volume_id = terraform_data.disks[each.key].output.overlay
  }

  disk {
    volume_id = terraform_data.disks[each.key].output.seed
  }

  dynamic "disk" {
    for_each = terraform_data.disks[each.key].output.data
    content {
      volume_id = disk.value
    }
  }

  network_interface { # (its DHCP host entry is in the network's definition)
    network_id = libvirt_network.this.id
    mac        = each.value.mac
  }

  xml {
    xslt = templatefile("${path.module}/files/domain.xsl.tftpl", {
      console_log = each.value.console_log
    })
  }
}

resource "terraform_data" "start" {
  for_each = local.nodes

  triggers_replace = [libvirt_domain.this[each.key].id]

  provisioner "local-exec" {
    command = join(" ", [
      "'${var.python}' -W ignore::RuntimeWarning -m harness.substrates.libvirt.snapshot start",
      "--uri '${var.libvirt_uri}' --domain '${each.value.domain}' --overlay '${each.value.overlay}'",
      "--base '${var.base_image}' --mac '${each.value.mac}' --ip '${each.value.ip}'",
      "--mode '${each.value.start}' --owner '${var.owner}' --timeout ${var.start_timeout}",
      "--data-mb '${join(",", [for mb in each.value.data_mb : tostring(mb)])}'",
      "--record '${local.record_dir}/start-${each.key}.json'",
    ])
  }
}

resource "terraform_data" "bmc" {
  for_each = toset(var.bmc_nodes)

  input = {
    python     = var.python
    trial_root = var.trial_root
    node       = each.key
  }

  provisioner "local-exec" {
    environment = { HX_SSH = var.host_ssh } # another machine's libvirt: the port is relayed
    command     = "'${var.python}' -W ignore::RuntimeWarning -m harness.substrates.libvirt.bmc start --trial-root '${var.trial_root}' --node '${each.key}' --name '${local.prefix}-${each.key}-bmc' --campaign '${var.campaign}' --owner '${var.owner}' --uri '${var.libvirt_uri}'"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "'${self.input.python}' -W ignore::RuntimeWarning -m harness.substrates.libvirt.bmc stop --trial-root '${self.input.trial_root}' --node '${self.input.node}'"
  }

  depends_on = [libvirt_domain.this, libvirt_network.this, terraform_data.start]
}
