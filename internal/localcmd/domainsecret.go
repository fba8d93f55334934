package localcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/pki"
)

// renewDomainSecret replaces the cluster domain secret through a job
// (OP_CLUSTER_RENEW_CRYPTO), so that corrald uses the new one at once. A
// given secret is first staged in the master's directory, readable only by
// corrald's user, for the job to install: it never travels in the job.
func renewDomainSecret(ctx context.Context, d Dirs, l bootstrap.Layout, file string, out io.Writer) error {
	op := map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "new_cluster_domain_secret": true}
	if file != "" {
		s, err := pki.ReadSecretFile(file)
		if err != nil {
			return ecode.Errorf(ecode.Inval, "%v", err)
		}
		if len(s.Reveal()) < 20 {
			return ecode.Errorf(ecode.Inval, "%s: a domain secret of %d characters is too short (Ganeti's are 40 hex characters)", file, len(s.Reveal()))
		}
		md := l.MasterDir()
		fi, err := os.Stat(md)
		if err != nil {
			return ecode.Errorf(ecode.Environ, "no master state here (%v): run this on the master node", err)
		}
		staged := filepath.Join(md, layout.StagedDomainSecretFile)
		if err := pki.WriteSecretFile(staged, s); err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if err := os.Chown(staged, int(st.Uid), int(st.Gid)); err != nil {
				os.Remove(staged)
				return err
			}
		}
		op = map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "staged_cluster_domain_secret": true}
	}
	return runRenewJob(ctx, d, op, out)
}

// renewSSHKeys renews every node's SSH key pair through a job; the master
// keeps its access to every node throughout (see cmdlib/sshrenew.go).
func renewSSHKeys(ctx context.Context, d Dirs, keyType string, keyBits int, out io.Writer) error {
	op := map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "renew_ssh_keys": true}
	if keyType != "" {
		op["ssh_key_type"] = keyType
	}
	if keyBits != 0 {
		op["ssh_key_bits"] = keyBits
	}
	return runRenewJob(ctx, d, op, out)
}

// runRenewJob submits op and follows its log until it ends.
func runRenewJob(ctx context.Context, d Dirs, op map[string]any, out io.Writer) error {
	c, err := luxi.Dial(ctx, d.Socket())
	if err != nil {
		return ecode.Errorf(ecode.Environ, "cannot reach corrald: %v", err)
	}
	defer c.Close()
	id, err := c.SubmitJob(ctx, []any{op})
	if err != nil {
		return err
	}
	status, _, err := luxi.WaitForJob(ctx, c, id, func(entry []any) {
		if len(entry) == 4 {
			fmt.Fprintf(out, "%v\n", entry[3])
		}
	})
	if err != nil {
		return fmt.Errorf("job %d: %w", id, err)
	}
	if status != "success" {
		return ecode.ExecErrorf("job %d ended %s", id, status)
	}
	return nil
}
