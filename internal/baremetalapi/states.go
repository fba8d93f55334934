package baremetalapi

import (
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/corral/corral/internal/cryptpw"
)

func (h *Handler) showStates(w http.ResponseWriter, r *http.Request, c *call) error {
	m, err := h.getMachine(r, r.PathValue("ident"))
	if err != nil {
		return err
	}
	keys := []string{"console_enabled", "last_error", "power_state", "provision_state", "provision_updated_at",
		"raid_config", "target_power_state", "target_provision_state", "target_raid_config", "boot_mode", "secure_boot"}
	writeJSON(w, http.StatusOK, nodeDoc(m, c.v, keys))
	return nil
}

// provisionTargets are the provision verbs with the version that
// introduced each; deploy and undeploy are aliases of active and deleted.
var provisionTargets = map[string]int{
	"active": 1, "deleted": 1, "rebuild": 1, "manage": 4, "provide": 4, "inspect": 6, "abort": 13,
	"clean": 15, "adopt": 17, "rescue": v38Rescue, "unrescue": v38Rescue, "deploy": v73DeployVerbs,
	"undeploy": v73DeployVerbs,
}

var provisionAliases = map[string]string{"deploy": "active", "undeploy": "deleted"}

var provisionFields = []string{"target", "configdrive", "clean_steps", "deploy_steps", "rescue_password",
	"disable_ramdisk", "ssh_public_keys"}

// provisionRequest is a decoded provision body.
type provisionRequest struct {
	target         string
	configDrive    any
	cleanSteps     []map[string]any
	deploySteps    []map[string]any
	rescuePassword *string
	sshKeys        []string
	disableRamdisk bool
	given          map[string]bool
}

// decodeProvision parses and checks a provision body against version v:
// targets and options newer than v are 406, misplaced options 400.
func decodeProvision(body []byte, v Version) (*provisionRequest, error) {
	obj, err := decodeObject(body, provisionFields, false)
	if err != nil {
		return nil, err
	}
	p := &provisionRequest{given: map[string]bool{}}
	for k := range obj {
		p.given[k] = true
	}
	dsts := map[string]any{"target": &p.target, "configdrive": &p.configDrive, "clean_steps": &p.cleanSteps,
		"deploy_steps": &p.deploySteps, "rescue_password": &p.rescuePassword, "ssh_public_keys": &p.sshKeys,
		"disable_ramdisk": &p.disableRamdisk}
	for k, dst := range dsts {
		if _, err := member(obj, k, dst); err != nil {
			return nil, err
		}
	}
	if p.target == "" {
		return nil, errorf(http.StatusBadRequest, "'target' is a required property")
	}
	if minor, ok := provisionTargets[p.target]; ok && !v.AtLeast(minor) {
		return nil, notAcceptable("Request not acceptable.")
	}
	if (p.given["deploy_steps"] && !v.AtLeast(v69DeploySteps)) || (p.given["disable_ramdisk"] && !v.AtLeast(v70DisableRamdisk)) {
		return nil, notAcceptable("Request not acceptable.")
	}
	if alias, ok := provisionAliases[p.target]; ok {
		p.target = alias
	}
	return p, p.check()
}

// check enforces which options go with which target, with Ironic's texts.
func (p *provisionRequest) check() error {
	switch {
	case p.given["configdrive"] && p.target != "active" && p.target != "rebuild":
		return errorf(http.StatusBadRequest, "Adding a config drive is only supported when setting provision state to %s or %s", "active", "rebuild")
	case p.given["clean_steps"] && p.target != "clean":
		return errorf(http.StatusBadRequest, "\"clean_steps\" is only valid when setting target provision state to %s", "clean")
	case p.target == "clean" && p.cleanSteps == nil:
		return errorf(http.StatusBadRequest, "\"clean_steps\" is required when setting target provision state to %s", "clean")
	case p.given["deploy_steps"] && p.target != "active" && p.target != "rebuild":
		return errorf(http.StatusBadRequest, "\"deploy_steps\" is only valid when setting target provision state to %s or %s", "active", "rebuild")
	case p.given["disable_ramdisk"] && p.target != "clean":
		return errorf(http.StatusBadRequest, "\"disable_ramdisk\" is only valid when setting target provision state to %s", "clean")
	case p.given["rescue_password"] && p.target != "rescue":
		return errorf(http.StatusBadRequest, "\"rescue_password\" is only valid when setting target provision state to %s", "rescue")
	case p.given["ssh_public_keys"] && p.target != "rescue":
		return errorf(http.StatusBadRequest, "\"ssh_public_keys\" is only valid when setting target provision state to %s", "rescue")
	case p.target == "rescue" && (p.rescuePassword == nil || strings.TrimSpace(*p.rescuePassword) == ""):
		return errorf(http.StatusBadRequest, "A non-empty \"rescue_password\" is required when setting target provision state to %s", "rescue")
	}
	if s, ok := p.configDrive.(string); ok && base64.StdEncoding.DecodedLen(len(s)) > maxConfigDrive+2 {
		return errorf(http.StatusRequestEntityTooLarge, "The config drive is larger than %d bytes.", maxConfigDrive)
	}
	return nil
}

func (h *Handler) setProvision(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r, maxProvisionBodyBytes)
	if err != nil {
		return err
	}
	p, err := decodeProvision(body, c.v)
	if err != nil {
		return err
	}
	ident := r.PathValue("ident")
	m, err := h.getMachine(r, ident)
	if err != nil {
		return err
	}
	if _, ok := provisionTargets[p.target]; !ok {
		return ErrInvalidTransition(p.target, m.UUID, m.ProvisionState)
	}
	args := ProvisionArgs{ConfigDrive: p.configDrive, CleanSteps: p.cleanSteps, DeploySteps: p.deploySteps,
		SSHPublicKeys: p.sshKeys, DisableRamdisk: p.disableRamdisk}
	if p.target == "rescue" {
		// The clear password ends here: only its hash goes on.
		hash, err := cryptpw.Hash(h.rescueHash, *p.rescuePassword)
		if err != nil {
			// cryptpw refuses passwords it cannot hash (too long, NUL)
			// with a message that does not carry the password.
			return errorf(http.StatusBadRequest, "The rescue password cannot be used: %s.", err.Error())
		}
		args.RescuePasswordHash = hash
	}
	if err := h.be.SetProvisionState(r.Context(), m.UUID, p.target, args); err != nil {
		return nodeErr(err, ident)
	}
	w.Header().Set("Location", c.base+"/v1/nodes/"+ident+"/states")
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// powerTargets are the power targets with the version of each.
var powerTargets = map[string]int{"power on": 1, "power off": 1, "rebooting": 1,
	"soft power off": v27SoftPower, "soft rebooting": v27SoftPower}

func (h *Handler) setPower(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		return err
	}
	obj, err := decodeObject(body, []string{"target", "timeout"}, false)
	if err != nil {
		return err
	}
	var target string
	var timeout *int
	if _, err := member(obj, "target", &target); err != nil {
		return err
	}
	if _, err := member(obj, "timeout", &timeout); err != nil {
		return err
	}
	minor, ok := powerTargets[target]
	switch {
	case !ok:
		return errorf(http.StatusBadRequest, "Invalid state %s requested for the power state.", target)
	case !c.v.AtLeast(minor), timeout != nil && !c.v.AtLeast(v27SoftPower):
		return notAcceptable("Request not acceptable.")
	case timeout != nil && *timeout < 1:
		return errorf(http.StatusBadRequest, "Invalid timeout value %d; a positive number of seconds is expected.", *timeout)
	}
	var d time.Duration
	if timeout != nil {
		d = time.Duration(*timeout) * time.Second
	}
	ident := r.PathValue("ident")
	if err := h.be.SetPowerState(r.Context(), ident, target, d); err != nil {
		return nodeErr(err, ident)
	}
	w.Header().Set("Location", c.base+"/v1/nodes/"+ident+"/states")
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func (h *Handler) setMaintenance(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		return err
	}
	obj, err := decodeObject(body, []string{"reason"}, true)
	if err != nil {
		return err
	}
	var reason *string
	if _, err := member(obj, "reason", &reason); err != nil {
		return err
	}
	ident := r.PathValue("ident")
	if err := h.be.SetMaintenance(r.Context(), ident, true, deref(reason)); err != nil {
		return nodeErr(err, ident)
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func (h *Handler) unsetMaintenance(w http.ResponseWriter, r *http.Request, c *call) error {
	ident := r.PathValue("ident")
	if err := h.be.SetMaintenance(r.Context(), ident, false, ""); err != nil {
		return nodeErr(err, ident)
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (h *Handler) validateNode(w http.ResponseWriter, r *http.Request, c *call) error {
	ident := r.PathValue("ident")
	res, err := h.be.Validate(r.Context(), ident)
	if err != nil {
		return nodeErr(err, ident)
	}
	out := map[string]any{}
	for iface, v := range res {
		if !c.v.AtLeast(nodeFieldMin[iface+"_interface"]) {
			continue
		}
		var reason any
		if v.Reason != "" {
			reason = v.Reason
		}
		out[iface] = map[string]any{"result": v.Result, "reason": reason}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
