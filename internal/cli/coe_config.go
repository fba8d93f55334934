package cli

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// adminCredential is what `cluster config` makes for the kubeconfig: a
// new key and a certificate for it signed by the cluster's CA.
type adminCredential struct {
	CAPEM, CertPEM, KeyPEM string
}

// newAdminCSR makes the key and certificate request the openstack client
// makes: RSA-2048, CN=admin, O=system:masters (Kubernetes' superuser
// group).
func newAdminCSR() (keyPEM, csrPEM string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("making the admin key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
	}, key)
	if err != nil {
		return "", "", fmt.Errorf("making the certificate request: %w", err)
	}
	keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	csrPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	return keyPEM, csrPEM, nil
}

// coeCA asks corrald for a cluster's CA certificate.
func coeCA(ctx context.Context, c *luxi.Client, cluster string) (coewire.Certificate, error) {
	var out coewire.Certificate
	err := c.Call(ctx, coewire.MethodCA, []any{cluster}, &out)
	return out, err
}

// coeSign has corrald sign a certificate request with a cluster's CA.
func coeSign(ctx context.Context, c *luxi.Client, cluster, csr string) (coewire.Certificate, error) {
	var out coewire.Certificate
	err := c.Call(ctx, coewire.MethodSign, []any{coewire.SignArgs{Cluster: cluster, CSR: csr}}, &out)
	return out, err
}

// kubeconfig is the file `openstack coe cluster config` writes for a
// Kubernetes cluster: its API address, the CA, and user admin with the
// client certificate (no credential when TLS is off).
func kubeconfig(name, server string, cred *adminCredential) string {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	if cred == nil {
		return fmt.Sprintf(`apiVersion: v1
clusters:
- cluster:
    server: %[2]s
  name: %[1]s
contexts:
- context:
    cluster: %[1]s
    user: %[1]s
  name: %[1]s
current-context: %[1]s
kind: Config
preferences: {}
users:
- name: %[1]s
`, name, server)
	}
	return fmt.Sprintf(`apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: %[3]s
    server: %[2]s
  name: %[1]s
contexts:
- context:
    cluster: %[1]s
    user: admin
  name: default
current-context: default
kind: Config
preferences: {}
users:
- name: admin
  user:
    client-certificate-data: %[4]s
    client-key-data: %[5]s
`, name, server, b64(cred.CAPEM), b64(cred.CertPEM), b64(cred.KeyPEM))
}

func (a *app) coeClusterConfigCmd() *cobra.Command {
	var dir string
	var force bool
	cmd := &cobra.Command{
		Use:   "config CLUSTER [--dir DIR] [--force]",
		Short: "Write a kubeconfig for a cluster, with an admin client certificate",
		Long: `Write DIR/config, a kubeconfig for kubectl with the cluster's API address and
CA, and print "export KUBECONFIG=DIR/config" (so that
eval $(corral coe cluster config k1) sets it). As the openstack client does,
a new RSA-2048 key and a certificate request for CN=admin, O=system:masters
are made here; the cluster's CA signs the request in corrald, and the key
never leaves this command but for the file, written with mode 0600. A
template with TLS disabled gets a kubeconfig without credentials.

The certificate stays valid until the cluster's CA is rotated.`,
		Example: "  corral coe cluster config k1\n  corral coe cluster config k1 --dir ~/.kube/k1 --force\n  eval $(corral coe cluster config k1 --dir /tmp/k1)",
		Args:    exactArgs(1, "a cluster name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return paramErr("--dir %s: %s", dir, err.Error())
			}
			file := filepath.Join(abs, "config")
			if _, err := os.Lstat(file); err == nil && !force {
				return ecode.Errorf(ecode.Exists, "File %s exists, aborting (--force overwrites it).", file)
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				r, err := coeCluster(ctx, c, args[0])
				if err != nil {
					return err
				}
				cl := r.Cluster
				if cl.APIAddress == "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "WARNING: The cluster's api_address is not known yet.")
				}
				t, err := coeTemplate(ctx, c, cl.Template)
				if err != nil {
					return err
				}
				if t.COE != "kubernetes" {
					return ecode.Errorf(ecode.Inval, "Cluster %s runs %s: only Kubernetes clusters have a kubeconfig.", cl.Name, t.COE)
				}
				var cred *adminCredential
				if !t.TLSDisabled {
					if cred, err = adminCredentialFor(ctx, c, cl.UUID); err != nil {
						return err
					}
				}
				if err := writePrivateFile(file, kubeconfig(cl.Name, cl.APIAddress, cred)); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "export KUBECONFIG=%s\n", file)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory to write the kubeconfig (config) in")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing DIR/config")
	return cmd
}

// adminCredentialFor makes a key, has its request signed by the cluster's
// CA and checks the certificate is the one asked for.
func adminCredentialFor(ctx context.Context, c *luxi.Client, cluster string) (*adminCredential, error) {
	ca, err := coeCA(ctx, c, cluster)
	if err != nil {
		return nil, err
	}
	keyPEM, csrPEM, err := newAdminCSR()
	if err != nil {
		return nil, err
	}
	signed, err := coeSign(ctx, c, cluster, csrPEM)
	if err != nil {
		return nil, err
	}
	if err := checkSignedBy(signed.PEM, ca.PEM, keyPEM); err != nil {
		return nil, err
	}
	return &adminCredential{CAPEM: ca.PEM, CertPEM: signed.PEM, KeyPEM: keyPEM}, nil
}

// checkSignedBy refuses a certificate that is not for the key made here or
// not signed by the CA: a kubeconfig with it would not work.
func checkSignedBy(certPEM, caPEM, keyPEM string) error {
	parse := func(what, s string) (*x509.Certificate, error) {
		b, _ := pem.Decode([]byte(s))
		if b == nil || b.Type != "CERTIFICATE" {
			return nil, ecode.Errorf(ecode.Fault, "the %s corrald answered is not a PEM certificate", what)
		}
		crt, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, ecode.Errorf(ecode.Fault, "the %s corrald answered cannot be read: %s", what, err.Error())
		}
		return crt, nil
	}
	crt, err := parse("signed certificate", certPEM)
	if err != nil {
		return err
	}
	ca, err := parse("cluster CA", caPEM)
	if err != nil {
		return err
	}
	if err := crt.CheckSignatureFrom(ca); err != nil {
		return ecode.Errorf(ecode.Fault, "the signed certificate is not signed by the cluster's CA: %s", err.Error())
	}
	kb, _ := pem.Decode([]byte(keyPEM))
	key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		return fmt.Errorf("reading back the admin key: %w", err)
	}
	if pub, ok := crt.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return ecode.Errorf(ecode.Fault, "the signed certificate is not for the key of the request")
	}
	return nil
}

// writePrivateFile writes data to path with mode 0600 (a key is in it),
// through a temporary file so a reader never sees half of it.
func writePrivateFile(path, data string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ecode.Errorf(ecode.Environ, "creating %s: %s", dir, err.Error())
	}
	f, err := os.CreateTemp(dir, ".config-*")
	if err != nil {
		return ecode.Errorf(ecode.Environ, "writing the kubeconfig: %s", err.Error())
	}
	tmp := f.Name()
	defer os.Remove(tmp) //nolint:errcheck // gone after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return ecode.Errorf(ecode.Environ, "writing the kubeconfig: %s", err.Error())
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return ecode.Errorf(ecode.Environ, "writing the kubeconfig: %s", err.Error())
	}
	if err := f.Close(); err != nil {
		return ecode.Errorf(ecode.Environ, "writing the kubeconfig: %s", err.Error())
	}
	if err := os.Rename(tmp, path); err != nil {
		return ecode.Errorf(ecode.Environ, "writing %s: %s", path, err.Error())
	}
	return nil
}

func (a *app) coeCAShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show CLUSTER",
		Short:   "Print a cluster's CA certificate (PEM)",
		Example: "  corral coe ca show k1 > k1-ca.pem",
		Args:    exactArgs(1, "a cluster name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				ca, err := coeCA(ctx, c, args[0])
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), withNewline(ca.PEM))
				return nil
			})
		},
	}
}

func withNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

func (a *app) coeCASignCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sign CLUSTER CSR_FILE",
		Short: "Sign a certificate request with a cluster's CA and print the certificate",
		Long: `Sign a PEM certificate request (file, or - for standard input) with the
cluster's CA, as "openstack coe ca sign": the subject's CN is the Kubernetes
user and its O the groups. corrald holds the CA's key; only the request and
the certificate travel.`,
		Example: "  openssl req -new -newkey rsa:2048 -nodes -keyout me.key -subj /CN=me/O=devs -out me.csr\n  corral coe ca sign k1 me.csr > me.crt",
		Args:    exactArgs(2, "a cluster name or uuid and a CSR file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var csr []byte
			var err error
			if args[1] == "-" {
				csr, err = io.ReadAll(a.env.stdin())
			} else {
				csr, err = os.ReadFile(args[1])
			}
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return paramErr("CSR file %s: %s", args[1], err.Error())
				}
				return ecode.Errorf(ecode.Environ, "reading %s: %s", args[1], err.Error())
			}
			if b, _ := pem.Decode(csr); b == nil || !strings.Contains(b.Type, "CERTIFICATE REQUEST") {
				return paramErr("%s is not a PEM certificate request", args[1])
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				crt, err := coeSign(ctx, c, args[0], string(csr))
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), withNewline(crt.PEM))
				return nil
			})
		},
	}
}

func (a *app) coeCARotateCmd() *cobra.Command {
	var w coeWaitOpts
	cmd := &cobra.Command{
		Use:   "rotate CLUSTER [--wait[=SECONDS]]",
		Short: "Replace a cluster's CA (disruptive: kubeconfigs of the old CA stop working)",
		Long: `Make a new CA for the cluster, re-sign its components' certificates and restart
them. Every kubeconfig and client certificate signed by the old CA stops
working: get a new one with "corral coe cluster config".`,
		Example: "  corral coe ca rotate k1 --wait",
		Args:    exactArgs(1, "a cluster name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				return a.coeAction(ctx, c, cmd.OutOrStdout(), map[string]any{"OP_ID": "OP_COE_CA_ROTATE", "cluster": args[0]},
					args[0], "rotate the CA of", w)
			})
		},
	}
	addCOEWaitFlag(cmd, &w)
	return cmd
}
