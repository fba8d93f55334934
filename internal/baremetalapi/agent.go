package baremetalapi

import (
	"net/http"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// heartbeatTimeout is how long (s) the agent may go without a heartbeat,
// told to it on lookup.
const heartbeatTimeout = 300

// agentConfig is the configuration a lookup hands the agent, with the
// token when this is the first lookup ("******" afterwards, as the token
// is shown in clear once).
func agentConfig(token string) map[string]any {
	if token == "" {
		token = masked
	}
	return map[string]any{
		"metrics": map[string]any{"backend": "noop", "prepend_host": false, "prepend_uuid": false,
			"prepend_host_reverse": true, "global_prefix": nil},
		"metrics_statsd":                 map[string]any{"statsd_host": "localhost", "statsd_port": 8125},
		"heartbeat_timeout":              heartbeatTimeout,
		"agent_token":                    token,
		"agent_token_required":           true,
		"disable_deep_image_inspection":  false,
		"permitted_image_formats":        []string{"raw", "qcow2", "iso"},
		"enable_bios_bootloader_install": true,
	}
}

// agentLookup answers an agent looking for its machine. Unknown
// machines, and machines whose state allows no lookup, are the same 404.
func (h *Handler) agentLookup(w http.ResponseWriter, r *http.Request, c *call) error {
	if !c.v.AtLeast(v22Lookup) {
		return ErrLookupNotFound()
	}
	q := r.URL.Query()
	var addrs []string
	for _, a := range strings.Split(q.Get("addresses"), ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		// Invalid addresses are left out, as Ironic does (an agent
		// reports every interface it has).
		if mac, err := normalizeMAC(a); err == nil {
			addrs = append(addrs, mac)
		}
	}
	uuid := q.Get("node_uuid")
	if uuid != "" && !uuidRE.MatchString(uuid) {
		return errorf(http.StatusBadRequest, "Expected a UUID but received %s.", uuid)
	}
	if len(addrs) == 0 && uuid == "" {
		return errorf(http.StatusBadRequest, "One of 'addresses' and 'node_uuid' parameters is required")
	}
	m, token, err := h.be.AgentLookup(r.Context(), addrs, strings.ToLower(uuid))
	if err != nil {
		return lookupErr(err)
	}
	node := renderNode(m, c.v, c.base, []string{"uuid", "properties", "instance_info", "driver_internal_info"})
	writeJSON(w, http.StatusOK, map[string]any{"node": node, "config": agentConfig(token)})
	return nil
}

// lookupErr hides which machines exist behind one 404.
func lookupErr(err error) error {
	if ecode.ClassOf(err) == ecode.NoEnt {
		return ErrLookupNotFound()
	}
	return err
}

var heartbeatFields = []string{"callback_url", "agent_token", "agent_version", "agent_verify_ca", "agent_status",
	"agent_status_message"}

// heartbeatGates are the heartbeat members with the version of each.
var heartbeatGates = map[string]int{"callback_url": v22Lookup, "agent_token": v62AgentToken,
	"agent_version": v36AgentVersion, "agent_verify_ca": v68VerifyCA, "agent_status": v72AgentStatus,
	"agent_status_message": v72AgentStatus}

// decodeHeartbeat parses and checks a heartbeat body against version v.
func decodeHeartbeat(body []byte, v Version) (Heartbeat, error) {
	var hb Heartbeat
	obj, err := decodeObject(body, heartbeatFields, false)
	if err != nil {
		return hb, err
	}
	dsts := map[string]*string{"callback_url": &hb.CallbackURL, "agent_token": &hb.AgentToken,
		"agent_version": &hb.AgentVersion, "agent_verify_ca": &hb.AgentVerifyCA, "agent_status": &hb.AgentStatus,
		"agent_status_message": &hb.AgentStatusMessage}
	for k, dst := range dsts {
		var s *string
		given, err := member(obj, k, &s)
		if err != nil {
			return hb, err
		}
		if given && !v.AtLeast(heartbeatGates[k]) {
			return hb, errorf(http.StatusBadRequest, "Field %s is not allowed in version %s.", k, v)
		}
		if s != nil {
			*dst = *s
		}
	}
	switch {
	case hb.CallbackURL == "":
		return hb, errorf(http.StatusBadRequest, "'callback_url' is a required property")
	case !strings.HasPrefix(hb.CallbackURL, "http://") && !strings.HasPrefix(hb.CallbackURL, "https://"):
		return hb, errorf(http.StatusBadRequest, "Invalid callback_url %s.", hb.CallbackURL)
	case hb.AgentStatus != "" && hb.AgentStatus != "start" && hb.AgentStatus != "end" && hb.AgentStatus != "error":
		return hb, errorf(http.StatusBadRequest, "Unknown agent status %s; it must be one of start, end, error.", hb.AgentStatus)
	case hb.AgentToken == "":
		return hb, ErrAgentTokenRequired()
	}
	return hb, nil
}

// agentHeartbeat takes an agent's heartbeat; the backend checks the
// token and acts.
func (h *Handler) agentHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	if !c.v.AtLeast(v22Lookup) {
		return ErrLookupNotFound()
	}
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		return err
	}
	hb, err := decodeHeartbeat(body, c.v)
	if err != nil {
		return err
	}
	ident := r.PathValue("ident")
	if err := h.be.AgentHeartbeat(r.Context(), ident, hb); err != nil {
		return nodeErr(err, ident)
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}
