package localcmd

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/ecode"
)

// renewCryptoLater are Ganeti's renew-crypto options for secrets Corral
// cannot renew yet; they are refused rather than silently ignored.
var renewCryptoLater = []struct {
	flag, what string
	file       bool // takes a FILE argument
}{
	{"new-spice-certificate", "SPICE certificates", false},
	{"spice-certificate", "SPICE certificates", true},
	{"spice-ca-certificate", "SPICE certificates", true},
	{"new-confd-hmac-key", "renewing the confd HMAC key", false},
}

func renewCryptoCmd(d Dirs) *cobra.Command {
	var newRAPI, force, newCDS, newSSH, newClusterCert, newNodeCerts bool
	var rapiFile, cdsFile, sshType string
	var sshBits int
	cmd := &cobra.Command{
		Use:   "renew-crypto [--new-rapi-certificate | --rapi-certificate FILE] [--new-cluster-domain-secret | --cluster-domain-secret FILE] [--force]",
		Short: "Replace the cluster's certificates, keys and secrets",
		Long: `Replace corral-rapi's TLS certificate and key, as Ganeti's gnt-cluster
renew-crypto does for the RAPI certificate:

  --new-rapi-certificate   issue a new key pair from the cluster CA, for the
                           names and addresses of the current certificate
  --rapi-certificate FILE  install a certificate of your own: FILE is PEM
                           with the certificate (optionally followed by its
                           chain) and its unencrypted private key; the key
                           must match, be RSA of at least 2048 bits or ECDSA,
                           and the certificate must be valid now

The files are replaced atomically with corral-rapi's owner and modes, and
corral-rapi serves the new certificate from its next TLS handshake, without
a restart. Run as root on the master node (a new certificate needs the
cluster CA's key).

The cluster domain secret is the key that signs the handshakes of instance
moves between clusters: both clusters of a move must share it.

  --new-cluster-domain-secret   make a new random one
  --cluster-domain-secret FILE  install the one in FILE (its first line, as
                                in Ganeti's cluster-domain-secret file), e.g.
                                the other cluster's

It is replaced by a job (OP_CLUSTER_RENEW_CRYPTO) and corrald uses it from
the next move on, without a restart.

  --new-ssh-keys [--ssh-key-type T] [--ssh-key-bits N]
                                give every online node a new SSH key pair,
                                made on the node, by a job: the new keys are
                                trusted everywhere before any node switches
                                to its new pair, and the old keys go last, so
                                the master never loses access to a node

  --new-node-certificates       give every online node daemon a new TLS
                                certificate, by a job: each node makes a new
                                key, the master signs it with the cluster CA
                                for the node's name, role and addresses, and
                                the node serves it from its next connection
                                on, without a restart; open connections and
                                the master's access are never interrupted
  --new-cluster-certificate     give corrald a new certificate from the
                                cluster CA (master.pem, the one it presents
                                to node daemons), by the same kind of job; it
                                is used from the next node connection on

The cluster CA itself is not replaced: rotating it needs a bundle with the
old and the new CA on every node before any certificate of the new CA is
used, which Corral does not do yet.

The other secrets Ganeti's command renews are not available yet.`,
		Example: "  corral cluster renew-crypto --new-rapi-certificate\n  corral cluster renew-crypto --rapi-certificate /root/rapi.pem --force\n  corral cluster renew-crypto --cluster-domain-secret /root/other-cluster-domain-secret --force",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, o := range renewCryptoLater {
				if cmd.Flags().Changed(o.flag) {
					return ecode.Errorf(ecode.Inval, "--%s: %s is not available yet", o.flag, o.what)
				}
			}
			if newRAPI && rapiFile != "" {
				return ecode.Errorf(ecode.Inval, "give only one of --new-rapi-certificate and --rapi-certificate FILE")
			}
			if newCDS && cdsFile != "" {
				return ecode.Errorf(ecode.Inval, "give only one of --new-cluster-domain-secret and --cluster-domain-secret FILE")
			}
			if !newSSH && (sshType != "" || sshBits != 0) {
				return ecode.Errorf(ecode.Inval, "--ssh-key-type and --ssh-key-bits go with --new-ssh-keys")
			}
			newCerts := newClusterCert || newNodeCerts
			if !newRAPI && rapiFile == "" && !newCDS && cdsFile == "" && !newSSH && !newCerts {
				return ecode.Errorf(ecode.Inval, "nothing to renew: give --new-rapi-certificate, --rapi-certificate FILE, --new-cluster-domain-secret, --cluster-domain-secret FILE, --new-ssh-keys, --new-node-certificates or --new-cluster-certificate")
			}
			if os.Geteuid() != 0 {
				return ecode.Errorf(ecode.Environ, "renew-crypto must run as root on the master node: it writes corral-rapi's key and reads the cluster CA's")
			}
			l := bootstrap.Layout{StateDir: d.StateDir(), RunDir: d.RunDir()}
			if newSSH {
				if !force {
					ok, err := confirm(cmd.InOrStdin(), d.Stdout, "Give every node a new SSH key pair? Keys kept elsewhere (known to other hosts) will need the new ones. Continue?")
					if err != nil {
						return err
					}
					if !ok {
						return ecode.Errorf(ecode.Inval, "aborted")
					}
				}
				if err := renewSSHKeys(cmd.Context(), d, sshType, sshBits, d.Stdout); err != nil {
					return err
				}
				if !newRAPI && rapiFile == "" && !newCDS && cdsFile == "" && !newCerts {
					return nil
				}
			}
			if newCerts {
				if !force {
					ok, err := confirm(cmd.InOrStdin(), d.Stdout, "Renew the cluster's TLS certificates (same CA)? Continue?")
					if err != nil {
						return err
					}
					if !ok {
						return ecode.Errorf(ecode.Inval, "aborted")
					}
				}
				op := map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "node_certificates": newNodeCerts, "new_cluster_certificate": newClusterCert}
				if err := runRenewJob(cmd.Context(), d, op, d.Stdout); err != nil {
					return err
				}
				if !newRAPI && rapiFile == "" && !newCDS && cdsFile == "" {
					return nil
				}
			}
			if !newRAPI && rapiFile == "" {
				if !force {
					ok, err := confirm(cmd.InOrStdin(), d.Stdout, "Replace the cluster domain secret? Moves to and from clusters that do not share the new one will fail. Continue?")
					if err != nil {
						return err
					}
					if !ok {
						return ecode.Errorf(ecode.Inval, "aborted")
					}
				}
				return renewDomainSecret(cmd.Context(), d, l, cdsFile, d.Stdout)
			}
			var bundle []byte
			if rapiFile != "" {
				var err error
				if bundle, err = os.ReadFile(rapiFile); err != nil {
					return ecode.Errorf(ecode.Environ, "reading the certificate: %v", err)
				}
				// Refuse a bad file before asking anything.
				if _, _, err := bootstrap.ParseRAPIBundle(bundle, time.Now()); err != nil {
					return fmt.Errorf("%s: %w", rapiFile, err)
				}
			}
			if !force {
				ok, err := confirm(cmd.InOrStdin(), d.Stdout, "Replace corral-rapi's certificate in "+l.RAPIDir()+"? Clients that pinned the old one will need the new one. Continue?")
				if err != nil {
					return err
				}
				if !ok {
					return ecode.Errorf(ecode.Inval, "aborted")
				}
			}
			var info *bootstrap.RAPICertInfo
			var err error
			if newRAPI {
				info, err = bootstrap.RenewRAPICert(l)
			} else {
				info, err = bootstrap.InstallRAPICert(l, bundle, time.Now())
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(d.Stdout, "corral-rapi certificate replaced: serial %s, %s, valid until %s.\n",
				info.Serial, info.Subject, info.NotAfter.UTC().Format(time.RFC3339))
			if !info.ClusterCA {
				fmt.Fprintf(d.Stdout, "Note: it does not verify against the cluster CA (%s); clients that use that file will refuse it.\n", l.RAPICA())
			}
			if newCDS || cdsFile != "" {
				return renewDomainSecret(cmd.Context(), d, l, cdsFile, d.Stdout)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&newRAPI, "new-rapi-certificate", false, "issue corral-rapi a new certificate from the cluster CA")
	f.StringVar(&rapiFile, "rapi-certificate", "", "install this PEM file (certificate, optional chain, private key) as corral-rapi's certificate")
	f.BoolVar(&newCDS, "new-cluster-domain-secret", false, "make a new cluster domain secret (a job)")
	f.StringVar(&cdsFile, "cluster-domain-secret", "", "install the cluster domain secret in FILE (a job)")
	f.BoolVar(&newSSH, "new-ssh-keys", false, "give every node a new SSH key pair (a job; the master never loses access to a node)")
	f.StringVar(&sshType, "ssh-key-type", "", "with --new-ssh-keys: the new keys' type (rsa, ecdsa or ed25519) from now on")
	f.IntVar(&sshBits, "ssh-key-bits", 0, "with --new-ssh-keys: the new keys' size from now on")
	f.BoolVar(&newNodeCerts, "new-node-certificates", false, "give every node daemon a new certificate from the cluster CA (a job; no restart, no loss of access)")
	f.BoolVar(&newClusterCert, "new-cluster-certificate", false, "give corrald a new certificate from the cluster CA for its calls to the nodes (a job)")
	f.BoolVar(&force, "force", false, "do not ask for confirmation")
	for _, o := range renewCryptoLater {
		if o.file {
			f.String(o.flag, "", "not available yet")
		} else {
			f.Bool(o.flag, false, "not available yet")
		}
		_ = f.MarkHidden(o.flag)
	}
	return cmd
}

// confirm asks a yes/no question; anything but y or yes is no.
func confirm(in io.Reader, out io.Writer, question string) (bool, error) {
	fmt.Fprintf(out, "%s y/[n]: ", question)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		if err == io.EOF {
			return false, nil
		}
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}
