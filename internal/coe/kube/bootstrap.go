package kube

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// Bootstrap tokens (Kubernetes' bootstrap.kubernetes.io/token Secrets):
// a kubelet presents "<id>.<secret>" to join; the id is public, the
// secret is not.
const (
	BootstrapTokenType      = "bootstrap.kubernetes.io/token"
	BootstrapTokenNamespace = "kube-system"
	bootstrapTokenPrefix    = "bootstrap-token-"
)

var (
	bootstrapTokenIDRE     = regexp.MustCompile(`^[a-z0-9]{6}$`)
	bootstrapTokenSecretRE = regexp.MustCompile(`^[a-z0-9]{16}$`)
)

// BootstrapToken is a token kubelets authenticate with while they have no
// certificate, as user system:bootstrap:<ID> in the group
// system:bootstrappers and the ExtraGroups.
type BootstrapToken struct {
	ID          string
	Secret      secret.Secret
	Description string
	Expiration  time.Time
	ExtraGroups []string // each system:bootstrappers:<...>
}

// BootstrapTokenSecretName is the Secret holding the token of that id.
func BootstrapTokenSecretName(id string) string { return bootstrapTokenPrefix + id }

// CreateBootstrapToken stores the token for the API server's bootstrap
// token authenticator (usage-bootstrap-authentication). ecode.Exists
// when a token of that id exists. Errors never hold the token's secret.
func (c *Client) CreateBootstrapToken(ctx context.Context, t BootstrapToken) error {
	if !bootstrapTokenIDRE.MatchString(t.ID) || !bootstrapTokenSecretRE.MatchString(t.Secret.Reveal()) {
		return ecode.Errorf(ecode.Inval, "kube: a bootstrap token is [a-z0-9]{6}.[a-z0-9]{16}")
	}
	data := map[string]string{
		"token-id":                       t.ID,
		"token-secret":                   t.Secret.Reveal(),
		"usage-bootstrap-authentication": "true",
	}
	if t.Description != "" {
		data["description"] = t.Description
	}
	if !t.Expiration.IsZero() {
		data["expiration"] = t.Expiration.UTC().Format(time.RFC3339)
	}
	if len(t.ExtraGroups) > 0 {
		data["auth-extra-groups"] = strings.Join(t.ExtraGroups, ",")
	}
	obj := map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   map[string]any{"name": BootstrapTokenSecretName(t.ID), "namespace": BootstrapTokenNamespace},
		"type":       BootstrapTokenType,
		"stringData": data,
	}
	return c.do(ctx, http.MethodPost, "/api/v1/namespaces/"+BootstrapTokenNamespace+"/secrets", "application/json", obj, nil)
}

// DeleteBootstrapToken deletes the token of that id; ecode.NoEnt when
// there is none.
func (c *Client) DeleteBootstrapToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/namespaces/"+BootstrapTokenNamespace+"/secrets/"+
		url.PathEscape(BootstrapTokenSecretName(id)), "", nil, nil)
}

// BootstrapTokenExists says whether the token's Secret is there.
func (c *Client) BootstrapTokenExists(ctx context.Context, id string) (bool, error) {
	err := c.do(ctx, http.MethodGet, "/api/v1/namespaces/"+BootstrapTokenNamespace+"/secrets/"+
		url.PathEscape(BootstrapTokenSecretName(id)), "", nil, &struct{}{})
	if ecode.ClassOf(err) == ecode.NoEnt {
		return false, nil
	}
	return err == nil, err
}

// Subject is a subject of a role binding: "Group" or "User".
type Subject struct {
	Kind string
	Name string
}

// EnsureClusterRoleBinding binds a ClusterRole to the subjects; a binding
// of that name that exists is left as it is.
func (c *Client) EnsureClusterRoleBinding(ctx context.Context, name, clusterRole string, subjects ...Subject) error {
	var subs []map[string]string
	for _, s := range subjects {
		subs = append(subs, map[string]string{"kind": s.Kind, "name": s.Name, "apiGroup": "rbac.authorization.k8s.io"})
	}
	obj := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRoleBinding",
		"metadata":   map[string]any{"name": name},
		"roleRef":    map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": clusterRole},
		"subjects":   subs,
	}
	err := c.do(ctx, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "application/json", obj, nil)
	if ecode.ClassOf(err) == ecode.Exists {
		return nil
	}
	return err
}
