# slurm: the cluster-wide slurm.conf, and the daemon each node runs.
class slurm (
  Optional[Integer] $max_job_count = undef,
  String $controller = 'node0',
  Array[String] $compute_nodes = ['node1', 'node2'],
) {
  file { '/etc/slurm/slurm.conf':
    ensure  => file,
    owner   => 'root',
    group   => 'root',
    mode    => '0644',
    content => epp('slurm/slurm.conf.epp', {
      'max_job_count' => $max_job_count,
      'controller'    => $controller,
      'compute_nodes' => $compute_nodes,
    }),
  }
  $daemon = $facts['networking']['hostname'] ? {
    $controller => 'slurmctld',
    default     => 'slurmd',
  }
  service { $daemon:
    ensure    => running,
    enable    => true,
    subscribe => File['/etc/slurm/slurm.conf'],
  }
}
