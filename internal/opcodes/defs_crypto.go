package opcodes

// cryptoDefs are the opcodes that renew the cluster's secrets.
func cryptoDefs() []Def {
	return []Def{
		{ID: "OP_CLUSTER_RENEW_CRYPTO", Doc: "renew the cluster's secrets", Params: []Param{
			{Name: "node_certificates", Type: TBool, Default: false, Doc: "renew the nodes' certificates"},
			{Name: "renew_ssh_keys", Type: TBool, Default: false, Doc: "renew the nodes' SSH keys"},
			{Name: "ssh_key_type", Type: TMaybeString, Default: nil},
			{Name: "ssh_key_bits", Type: TMaybeInt, Default: nil},
			{Name: "verbose", Type: TBool, Default: false},
			{Name: "debug", Type: TBool, Default: false},
			// Corral only: the domain secret is replaced by a job, so that
			// it applies on the masters without a restart.
			{Name: "new_cluster_domain_secret", Type: TBool, Default: false, Doc: "make a new cluster domain secret (Corral only)"},
			{Name: "upgrade_ssh", Type: TBool, Default: false, Doc: "with renew_ssh_keys: move a cluster whose nodes share one SSH key to per-node keys and retire the shared key (Corral only)"},
			{Name: "new_cluster_certificate", Type: TBool, Default: false, Doc: "give corrald a new certificate from the cluster CA for its calls to the nodes (Corral only; Ganeti renews it outside a job)"},
			{Name: "staged_cluster_domain_secret", Type: TBool, Default: false, Doc: "install the domain secret that `corral cluster renew-crypto --cluster-domain-secret FILE` staged on the master (Corral only)"},
		}},
	}
}
