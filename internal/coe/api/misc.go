package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
)

func (h *Handler) showCA(w http.ResponseWriter, r *http.Request, c *call) error {
	cert, err := h.be.GetCA(r.Context(), c.who, r.PathValue("cluster"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, certificateDoc(cert, c.base, ""))
	return nil
}

var signKinds = map[string]fieldKind{"cluster_uuid": kindString, "bay_uuid": kindString, "csr": kindString, "ca_cert_type": kindString}

func (h *Handler) signCSR(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	f, err := decodeFields(body, signKinds)
	if err != nil {
		return err
	}
	cluster, _ := f["cluster_uuid"].(string)
	if cluster == "" {
		return badRequest("Invalid input for field/attribute cluster_uuid. Value: None. Mandatory field missing.")
	}
	csr, _ := f["csr"].(string)
	if strings.TrimSpace(csr) == "" {
		return badRequest("Invalid input for field/attribute csr. Value: None. Mandatory field missing.")
	}
	if t, _ := f["ca_cert_type"].(string); t != "" && t != "kubernetes" {
		return badRequest("Invalid input for field/attribute ca_cert_type. Only the kubernetes CA signs here.")
	}
	cert, err := h.be.SignCSR(r.Context(), c.who, cluster, csr)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, certificateDoc(cert, c.base, csr))
	return nil
}

func (h *Handler) rotateCA(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v5CARotate, "patch"); err != nil {
		return err
	}
	uuid, err := h.be.RotateCA(r.Context(), c.who, r.PathValue("cluster"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"uuid": uuid})
	return nil
}

var quotaKinds = map[string]fieldKind{"project_id": kindString, "resource": kindString, "hard_limit": kindInt}

// decodeQuota parses a quota body: project and resource (the only one is
// Cluster) and a hard limit not below 0. For an update the path names the
// quota and the body may repeat it, not contradict it.
func decodeQuota(body []byte, project, resource string) (string, string, int, error) {
	f, err := decodeFields(body, quotaKinds)
	if err != nil {
		return "", "", 0, err
	}
	for k, path := range map[string]string{"project_id": project, "resource": resource} {
		v, _ := f[k].(string)
		switch {
		case v == "" && path == "":
			return "", "", 0, badRequest("Invalid input for field/attribute %s. Value: None. Mandatory field missing.", k)
		case v != "" && path != "" && v != path:
			return "", "", 0, badRequest("Invalid input for field/attribute %s. Value: '%s'. It differs from the quota's path (%s).", k, v, path)
		case v == "":
			f[k] = path
		}
	}
	project, resource = f["project_id"].(string), f["resource"].(string)
	if resource != QuotaResource {
		return "", "", 0, badRequest("Invalid input for field/attribute resource. Value: '%s'. Value should be one of: %s", resource, QuotaResource)
	}
	limit, ok := f["hard_limit"].(int)
	if !ok {
		limit = 1 // Magnum's default
	}
	if limit < 0 {
		return "", "", 0, badRequest("Invalid input for field/attribute hard_limit. Value: %d. Value should be greater or equal to 0", limit)
	}
	return project, resource, limit, nil
}

func (h *Handler) listQuotas(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v6Quotas, "get_all"); err != nil {
		return err
	}
	qs, err := h.be.ListQuotas(r.Context(), c.who, trueish(r.URL.Query().Get("all_tenants")))
	if err != nil {
		return err
	}
	slices.SortFunc(qs, func(a, b *config.COEQuota) int { return strings.Compare(a.Name, b.Name) })
	out := make([]map[string]any, 0, len(qs))
	for _, q := range qs {
		out = append(out, quotaDoc(q))
	}
	writeJSON(w, http.StatusOK, map[string]any{"quotas": out})
	return nil
}

func (h *Handler) showQuota(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v6Quotas, "get_one"); err != nil {
		return err
	}
	q, err := h.be.GetQuota(r.Context(), c.who, r.PathValue("project"), r.PathValue("resource"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, quotaDoc(q))
	return nil
}

func (h *Handler) createQuota(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.setQuota(w, r, c, true)
}

func (h *Handler) updateQuota(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.setQuota(w, r, c, false)
}

func (h *Handler) setQuota(w http.ResponseWriter, r *http.Request, c *call, create bool) error {
	if err := gate(c, v6Quotas, map[bool]string{true: "post", false: "patch"}[create]); err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	project, resource, limit, err := decodeQuota(body, r.PathValue("project"), r.PathValue("resource"))
	if err != nil {
		return err
	}
	q, err := h.be.SetQuota(r.Context(), c.who, project, resource, limit, create)
	if err != nil {
		return err
	}
	code := http.StatusAccepted
	if create {
		code = http.StatusCreated
	}
	writeJSON(w, code, quotaDoc(q))
	return nil
}

func (h *Handler) deleteQuota(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v6Quotas, "delete"); err != nil {
		return err
	}
	if err := h.be.DeleteQuota(r.Context(), c.who, r.PathValue("project"), r.PathValue("resource")); err != nil {
		return err
	}
	noContent(w)
	return nil
}

func (h *Handler) stats(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v4Stats, "get_all"); err != nil {
		return err
	}
	q := r.URL.Query()
	if t := q.Get("type"); t != "" && t != "cluster" {
		return badRequest("Invalid stats type %s: only cluster is counted.", t)
	}
	st, err := h.be.Stats(r.Context(), c.who, q.Get("project_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (h *Handler) listServices(w http.ResponseWriter, r *http.Request, c *call) error {
	ss, err := h.be.Services(r.Context(), c.who)
	if err != nil {
		return err
	}
	if ss == nil {
		ss = []Service{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"mservices": ss})
	return nil
}
