package localcmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/pair"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/rapi"
	"github.com/corral/corral/internal/secret"
)

// maxPairValidity bounds how long an invitation may stay open.
const maxPairValidity = 24 * time.Hour

func pairCmd(d Dirs) *cobra.Command {
	c := &cobra.Command{
		Use:   "pair",
		Short: "Let two clusters share their domain secret for instance moves",
		Long: `Pair two clusters so that instances can move between them, without
copying secrets by hand.

On the master of the first cluster, make an invitation:

  corral cluster pair create

It prints a one-time token that expires (10 minutes by default). On the
master of the second cluster, within that time:

  corral cluster pair join TOKEN

The second cluster connects to the first one's RAPI, verifies it with the
CA the token carries, proves it holds the token and receives the first
cluster's domain secret, sealed for it alone (corral-rapi relays the
exchange but cannot read it). It installs that secret through a job, as
renew-crypto --cluster-domain-secret does, and keeps the first cluster's
RAPI CA for the move tool's --src-ca-file/--dest-ca-file. Each side records
the other in <state-dir>/master/peers/. Both print the other's RAPI CA
fingerprint so you can compare them.`,
	}
	c.AddCommand(pairCreateCmd(d), pairJoinCmd(d))
	return c
}

// rapiURLFromCert derives https://ADDRESS:PORT from the RAPI certificate's
// first IP address (else DNS name).
func rapiURLFromCert(certPath string, port int) (string, error) {
	b, err := os.ReadFile(certPath)
	if err != nil {
		return "", err
	}
	certs, err := pki.ParseCertificatesPEM(b)
	if err != nil || len(certs) == 0 {
		return "", fmt.Errorf("%s holds no certificate", certPath)
	}
	host := ""
	if len(certs[0].IPAddresses) > 0 {
		host = certs[0].IPAddresses[0].String()
	} else if len(certs[0].DNSNames) > 0 {
		host = certs[0].DNSNames[0]
	}
	if host == "" {
		return "", fmt.Errorf("the RAPI certificate names no address: give --rapi-url")
	}
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// clusterName asks corrald for the cluster's name.
func clusterName(ctx context.Context, d Dirs) (string, error) {
	c, err := luxi.Dial(ctx, d.Socket())
	if err != nil {
		return "", ecode.Errorf(ecode.Environ, "cannot reach corrald: %v", err)
	}
	defer c.Close()
	info, err := c.QueryClusterInfo(ctx)
	if err != nil {
		return "", err
	}
	name, _ := info["name"].(string)
	return name, nil
}

// ownPeer describes this cluster: its name, RAPI address and RAPI CA.
func ownPeer(ctx context.Context, d Dirs, l bootstrap.Layout, rapiURL string, port int) (pair.Peer, error) {
	name, err := clusterName(ctx, d)
	if err != nil {
		return pair.Peer{}, err
	}
	if rapiURL == "" {
		if rapiURL, err = rapiURLFromCert(l.RAPICert(), port); err != nil {
			return pair.Peer{}, ecode.Errorf(ecode.Environ, "cannot tell this cluster's RAPI address: %v", err)
		}
	}
	ca, err := os.ReadFile(l.RAPICA())
	if err != nil {
		return pair.Peer{}, ecode.Errorf(ecode.Environ, "reading the RAPI CA: %v", err)
	}
	return pair.Peer{Cluster: name, RAPIURL: rapiURL, RAPICA: string(ca)}, nil
}

func requireRootMaster(l bootstrap.Layout) (uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return 0, 0, ecode.Errorf(ecode.Environ, "pairing runs as root on the master node")
	}
	fi, err := os.Stat(l.MasterDir())
	if err != nil {
		return 0, 0, ecode.Errorf(ecode.Environ, "no master state here (%v): run this on the master node", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), nil
}

func pairCreateCmd(d Dirs) *cobra.Command {
	var valid time.Duration
	var rapiURL string
	var port int
	cmd := &cobra.Command{
		Use:   "create [--valid 10m] [--rapi-url URL]",
		Short: "Make a one-time pairing token for another cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if valid <= 0 || valid > maxPairValidity {
				return ecode.Errorf(ecode.Inval, "--valid must be between 1s and %s", maxPairValidity)
			}
			l := bootstrap.Layout{StateDir: d.StateDir(), RunDir: d.RunDir()}
			uid, gid, err := requireRootMaster(l)
			if err != nil {
				return err
			}
			me, err := ownPeer(cmd.Context(), d, l, rapiURL, port)
			if err != nil {
				return err
			}
			now := time.Now()
			tok, err := pair.NewToken(me.RAPIURL, []byte(me.RAPICA), valid, now)
			if err != nil {
				return err
			}
			inv := pair.Invitation{ID: tok.ID, Secret: tok.Secret, Expires: tok.Expires, Me: me}
			if err := pair.WriteInvitation(filepath.Join(l.MasterDir(), layout.PairingDir), inv, uid, gid); err != nil {
				return err
			}
			fmt.Fprintf(d.Stdout, "Pairing token for cluster %s (RAPI %s, CA %s), usable once until %s:\n\n%s\n\n",
				me.Cluster, me.RAPIURL, pair.Fingerprint(me.RAPICA), time.Unix(tok.Expires, 0).UTC().Format(time.RFC3339), tok.Encode())
			fmt.Fprintln(d.Stdout, "On the master of the other cluster run: corral cluster pair join TOKEN")
			fmt.Fprintln(d.Stdout, "Treat the token as a password until it is used or expires.")
			return nil
		},
	}
	cmd.Flags().DurationVar(&valid, "valid", 10*time.Minute, "how long the token can be used")
	cmd.Flags().StringVar(&rapiURL, "rapi-url", "", "this cluster's RAPI address as the other cluster reaches it (default: https://<address of the RAPI certificate>:<rapi-port>)")
	cmd.Flags().IntVar(&port, "rapi-port", 5080, "RAPI port for the default --rapi-url")
	return cmd
}

func pairJoinCmd(d Dirs) *cobra.Command {
	var rapiURL string
	var port int
	var force bool
	cmd := &cobra.Command{
		Use:   "join TOKEN [--rapi-url URL] [--force]",
		Short: "Join a cluster with its pairing token and take its domain secret",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := pair.ParseToken(args[0])
			if err != nil {
				return ecode.Errorf(ecode.Inval, "%v", err)
			}
			if tok.Expired(time.Now()) {
				return ecode.Errorf(ecode.State, "the token expired at %s: make a new one", time.Unix(tok.Expires, 0).UTC().Format(time.RFC3339))
			}
			l := bootstrap.Layout{StateDir: d.StateDir(), RunDir: d.RunDir()}
			if _, _, err := requireRootMaster(l); err != nil {
				return err
			}
			me, err := ownPeer(cmd.Context(), d, l, rapiURL, port)
			if err != nil {
				return err
			}
			if !force {
				ok, err := confirm(cmd.InOrStdin(), d.Stdout, fmt.Sprintf("Take the domain secret of the cluster at %s (CA %s) as this cluster's? Moves with clusters that share the current one will need it too. Continue?", tok.URL, pair.Fingerprint(tok.CAPEM)))
				if err != nil {
					return err
				}
				if !ok {
					return ecode.Errorf(ecode.Inval, "aborted")
				}
			}
			joiner, req, err := pair.NewRequest(tok, me)
			if err != nil {
				return err
			}
			reply, err := postPair(cmd.Context(), tok, req)
			if err != nil {
				return err
			}
			cds, err := joiner.Open(*reply)
			if err != nil {
				return err
			}
			peer := reply.Inviter
			if !pair.ValidPeerName(peer.Cluster) {
				return ecode.Errorf(ecode.Fault, "the other cluster sent no usable name")
			}
			caPath, err := savePeer(l, peer, tok.CAPEM)
			if err != nil {
				return err
			}
			if err := installDomainSecret(cmd.Context(), d, l, cds); err != nil {
				return err
			}
			fmt.Fprintf(d.Stdout, "Paired with cluster %s (RAPI %s, CA %s).\n", peer.Cluster, tok.URL, pair.Fingerprint(tok.CAPEM))
			fmt.Fprintf(d.Stdout, "Its RAPI CA is in %s: give it to corral instance move as --src-ca-file or --dest-ca-file.\n", caPath)
			return nil
		},
	}
	cmd.Flags().StringVar(&rapiURL, "rapi-url", "", "this cluster's RAPI address as the other cluster reaches it (default: https://<address of the RAPI certificate>:<rapi-port>)")
	cmd.Flags().IntVar(&port, "rapi-port", 5080, "RAPI port for the default --rapi-url")
	cmd.Flags().BoolVar(&force, "force", false, "do not ask for confirmation")
	return cmd
}

// postPair sends the request to the inviting cluster's corral-rapi,
// trusting only the CA the token carries.
func postPair(ctx context.Context, tok pair.Token, req pair.Request) (*pair.Reply, error) {
	pool, err := tok.CAPool()
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, tok.URL+rapi.PairPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hreq)
	if err != nil {
		var uerr x509.UnknownAuthorityError
		if errors.As(err, &uerr) {
			return nil, ecode.Errorf(ecode.Environ, "%s does not present a certificate of the token's CA: refusing it", tok.URL)
		}
		return nil, ecode.Errorf(ecode.Environ, "cannot reach %s: %v", tok.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(data, &e)
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return nil, ecode.Errorf(ecode.Environ, "the other cluster refused the pairing (%d): %s", resp.StatusCode, e.Message)
	}
	var reply pair.Reply
	if err := json.Unmarshal(data, &reply); err != nil {
		return nil, fmt.Errorf("the other cluster's answer is malformed: %w", err)
	}
	return &reply, nil
}

// savePeer records the inviting cluster and its RAPI CA in the master's
// peers directory and returns the CA file's path.
func savePeer(l bootstrap.Layout, peer pair.Peer, caPEM string) (string, error) {
	if b, _ := pem.Decode([]byte(caPEM)); b == nil {
		return "", ecode.Errorf(ecode.Inval, "the token's CA is not PEM")
	}
	dir := filepath.Join(l.MasterDir(), layout.PeersDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	caPath := filepath.Join(dir, peer.Cluster+"-rapi-ca.pem")
	if err := atomicfile.WriteFile(caPath, []byte(caPEM), 0o644); err != nil {
		return "", err
	}
	peer.RAPICA = caPEM
	b, _ := json.MarshalIndent(peer, "", "  ")
	if err := atomicfile.WriteFile(filepath.Join(dir, peer.Cluster+".json"), b, 0o600); err != nil {
		return "", err
	}
	return caPath, nil
}

// installDomainSecret stages a secret and installs it with the renew job.
func installDomainSecret(ctx context.Context, d Dirs, l bootstrap.Layout, s secret.Secret) error {
	f, err := os.CreateTemp("", "corral-cds-")
	if err != nil {
		return err
	}
	name := f.Name()
	defer os.Remove(name)
	f.Close()
	if err := pki.WriteSecretFile(name, s); err != nil {
		return err
	}
	return renewDomainSecret(ctx, d, l, name, d.Stdout)
}
