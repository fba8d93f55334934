package k8sbm

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// Where the join configuration puts its files on the machine (kubeadm's
// places), and the kubelet flags the image must run kubelet with.
const (
	BootstrapKubeconfigPath = "/etc/kubernetes/bootstrap-kubelet.conf"
	KubeletKubeconfigPath   = "/etc/kubernetes/kubelet.conf"
	CACertPath              = "/etc/kubernetes/pki/ca.crt"
	KubeletDefaultsPath     = "/etc/default/kubelet"
	// CloudConfigHeader starts the config drive's user_data: cloud-init's
	// cloud-config, written as JSON (which YAML reads as it is).
	CloudConfigHeader = "#cloud-config\n"
)

// BootstrapGroup is the group every bootstrap token of a k8s_bm cluster
// puts its kubelet in (system:bootstrappers:<...>, as kubeadm's
// system:bootstrappers:kubeadm:default-node-token).
const BootstrapGroup = "system:bootstrappers:corral:default-node-token"

// JoinConfig is what a machine needs to join a cluster's control plane.
type JoinConfig struct {
	ClusterName string
	NodeName    string // the machine's name, its kube node's
	Server      string // the API server's URL
	CACert      []byte
	// Token is "<id>.<secret>", a bootstrap token.
	Token secret.Secret
}

const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// newBootstrapToken makes a token id ([a-z0-9]{6}) and secret
// ([a-z0-9]{16}) from the system's random source.
func newBootstrapToken() (id string, sec secret.Secret, err error) {
	pick := func(n int) (string, error) {
		var sb strings.Builder
		for range n {
			i, err := rand.Int(rand.Reader, big.NewInt(int64(len(tokenAlphabet))))
			if err != nil {
				return "", ecode.Errorf(ecode.Fault, "reading random bytes for a bootstrap token: %w", err)
			}
			sb.WriteByte(tokenAlphabet[i.Int64()])
		}
		return sb.String(), nil
	}
	if id, err = pick(6); err != nil {
		return "", "", err
	}
	s, err := pick(16)
	return id, secret.Secret(s), err
}

// tokenOf is the token a kubelet presents: "<id>.<secret>".
func tokenOf(id string, sec secret.Secret) secret.Secret {
	return secret.Secret(id + "." + sec.Reveal())
}

// BootstrapKubeconfig is the kubeconfig kubelet's --bootstrap-kubeconfig
// takes: the API server, its CA and the bootstrap token.
func (j JoinConfig) BootstrapKubeconfig() (secret.Secret, error) {
	kc := map[string]any{
		"apiVersion": "v1",
		"kind":       "Config",
		"clusters": []any{map[string]any{"name": j.ClusterName, "cluster": map[string]any{
			"server": j.Server, "certificate-authority-data": base64.StdEncoding.EncodeToString(j.CACert)}}},
		"users":           []any{map[string]any{"name": "kubelet-bootstrap", "user": map[string]any{"token": j.Token.Reveal()}}},
		"contexts":        []any{map[string]any{"name": "default", "context": map[string]any{"cluster": j.ClusterName, "user": "kubelet-bootstrap"}}},
		"current-context": "default",
	}
	b, err := json.MarshalIndent(kc, "", "  ")
	if err != nil {
		return "", ecode.Errorf(ecode.Fault, "encoding the bootstrap kubeconfig of %s: %w", j.NodeName, err)
	}
	return secret.Secret(b), nil
}

// KubeletArgs are the flags the machine's kubelet must run with, which
// the config drive writes as KUBELET_EXTRA_ARGS.
func (j JoinConfig) KubeletArgs() []string {
	return []string{"--bootstrap-kubeconfig=" + BootstrapKubeconfigPath, "--kubeconfig=" + KubeletKubeconfigPath,
		"--hostname-override=" + j.NodeName}
}

// ConfigDrive is the deploy's config drive, as the Bare Metal API takes
// it (a JSON object of meta_data and user_data, which the conductor
// turns into the drive): meta_data names the machine, user_data is a
// cloud-config writing the CA, the bootstrap kubeconfig and the
// kubelet's flags. It holds the token: it is a secret.
func (j JoinConfig) ConfigDrive(machineUUID string) (map[string]any, error) {
	kc, err := j.BootstrapKubeconfig()
	if err != nil {
		return nil, err
	}
	cc := map[string]any{
		"hostname": j.NodeName,
		"write_files": []any{
			map[string]any{"path": CACertPath, "permissions": "0644", "content": string(j.CACert)},
			map[string]any{"path": BootstrapKubeconfigPath, "permissions": "0600", "content": kc.Reveal()},
			map[string]any{"path": KubeletDefaultsPath, "permissions": "0644",
				"content": fmt.Sprintf("KUBELET_EXTRA_ARGS=%q\n", strings.Join(j.KubeletArgs(), " "))},
		},
	}
	b, err := json.MarshalIndent(cc, "", "  ")
	if err != nil {
		return nil, ecode.Errorf(ecode.Fault, "encoding the user data of %s: %w", j.NodeName, err)
	}
	return map[string]any{
		"meta_data": map[string]any{"uuid": machineUUID, "name": j.NodeName, "hostname": j.NodeName,
			"corral_api_server": j.Server},
		"user_data": CloudConfigHeader + string(b),
	}, nil
}

// ReadConfigDrive reads back the files a config drive's user_data writes,
// by path: what a machine's first boot does with it.
func ReadConfigDrive(cd map[string]any) (map[string]string, error) {
	ud, _ := cd["user_data"].(string)
	body, ok := strings.CutPrefix(ud, CloudConfigHeader)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "the config drive's user_data is not a cloud-config")
	}
	var cc struct {
		WriteFiles []struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		} `json:"write_files"`
	}
	if err := json.Unmarshal([]byte(body), &cc); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "the config drive's cloud-config does not decode: %w", err)
	}
	out := map[string]string{}
	for _, f := range cc.WriteFiles {
		out[f.Path] = f.Content
	}
	return out, nil
}
