package bmc

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Redfish serves a minimal Redfish tree over machines: the service root,
// the Systems collection and one ComputerSystem per machine (power state,
// boot override, the Reset action), and one Manager per machine with a
// virtual CD (InsertMedia, EjectMedia). Everything but the service root
// needs HTTP basic authentication.
type Redfish struct {
	Machines map[string]*Machine // by system id (the machine's name)
	User     string
	Password string
	// ErrorLog receives failures of chassis actions; nil means log's
	// default logger.
	ErrorLog *log.Logger
}

const redfishRoot = "/redfish/v1"

// Reset types the Reset action accepts.
var resetTypes = []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PushPowerButton"}

// Boot override targets and how they map to the machine's boot devices.
var bootTargets = map[string]string{"None": BootNone, "Pxe": BootPXE, "Cd": BootCDROM, "Hdd": BootDisk, "BiosSetup": BootBIOS}

func (s *Redfish) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch path {
	case "/redfish":
		writeJSON(w, http.StatusOK, map[string]any{"v1": redfishRoot + "/"})
		return
	case redfishRoot:
		s.serviceRoot(w, r)
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="corral-bmc"`)
		redfishError(w, http.StatusUnauthorized, "Base.1.0.NoValidSession", "authentication required")
		return
	}
	parts := strings.Split(strings.TrimPrefix(path, redfishRoot+"/"), "/")
	if !strings.HasPrefix(path, redfishRoot+"/") {
		redfishError(w, http.StatusNotFound, "Base.1.0.ResourceMissingAtURI", "no resource at "+r.URL.Path)
		return
	}
	switch {
	case len(parts) == 1 && parts[0] == "Systems":
		s.collection(w, r, "Systems", "#ComputerSystemCollection.ComputerSystemCollection", "Computer System Collection")
	case len(parts) == 1 && parts[0] == "Managers":
		s.collection(w, r, "Managers", "#ManagerCollection.ManagerCollection", "Manager Collection")
	case len(parts) >= 2 && parts[0] == "Systems":
		s.withMachine(w, r, parts[1], func(m *Machine) { s.system(w, r, m, parts[2:]) })
	case len(parts) >= 2 && parts[0] == "Managers":
		s.withMachine(w, r, parts[1], func(m *Machine) { s.manager(w, r, m, parts[2:]) })
	default:
		redfishError(w, http.StatusNotFound, "Base.1.0.ResourceMissingAtURI", "no resource at "+r.URL.Path)
	}
}

// authorized compares the credentials in constant time (over digests, so
// the lengths do not show either).
func (s *Redfish) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	uw, ug := sha256.Sum256([]byte(s.User)), sha256.Sum256([]byte(user))
	pw, pg := sha256.Sum256([]byte(s.Password)), sha256.Sum256([]byte(pass))
	return subtle.ConstantTimeCompare(uw[:], ug[:])&subtle.ConstantTimeCompare(pw[:], pg[:]) == 1
}

func (s *Redfish) withMachine(w http.ResponseWriter, r *http.Request, id string, f func(*Machine)) {
	m, ok := s.Machines[id]
	if !ok {
		redfishError(w, http.StatusNotFound, "Base.1.0.ResourceMissingAtURI", "no resource at "+r.URL.Path)
		return
	}
	f(m)
}

func (s *Redfish) ids() []string {
	ids := make([]string, 0, len(s.Machines))
	for id := range s.Machines {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (s *Redfish) serviceRoot(w http.ResponseWriter, r *http.Request) {
	if !onlyMethods(w, r, http.MethodGet) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":      redfishRoot + "/",
		"@odata.type":    "#ServiceRoot.v1_5_0.ServiceRoot",
		"Id":             "RootService",
		"Name":           "Corral BMC Root Service",
		"RedfishVersion": "1.6.0",
		"UUID":           "2c1e4a7b-8f0d-4d52-9a36-6f1cbd7f0a11",
		"Systems":        odataID(redfishRoot + "/Systems"),
		"Managers":       odataID(redfishRoot + "/Managers"),
		"Links":          map[string]any{},
	})
}

func (s *Redfish) collection(w http.ResponseWriter, r *http.Request, kind, odataType, name string) {
	if !onlyMethods(w, r, http.MethodGet) {
		return
	}
	members := []any{}
	for _, id := range s.ids() {
		members = append(members, odataID(redfishRoot+"/"+kind+"/"+id))
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":           redfishRoot + "/" + kind,
		"@odata.type":         odataType,
		"Name":                name,
		"Members":             members,
		"Members@odata.count": len(members),
	})
}

func odataID(path string) map[string]any { return map[string]any{"@odata.id": path} }

func onlyMethods(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	redfishError(w, http.StatusMethodNotAllowed, "Base.1.0.ActionNotSupported", r.Method+" is not allowed on "+r.URL.Path)
	return false
}

// readBody decodes a small JSON request body.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err == nil && len(data) > 0 {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		redfishError(w, http.StatusBadRequest, "Base.1.0.MalformedJSON", "request body is not valid JSON")
		return false
	}
	return true
}

// actionContext bounds one chassis action independently of the client's
// connection: a power on that started should finish.
func actionContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// chassisFailed answers a failed chassis action: input errors are the
// client's, anything else the BMC's.
func (s *Redfish) chassisFailed(w http.ResponseWriter, what string, err error) {
	logger := s.ErrorLog
	if logger == nil {
		logger = log.Default()
	}
	logger.Printf("redfish %s: %v", what, err)
	switch ecode.ClassOf(err) {
	case ecode.Inval:
		redfishError(w, http.StatusBadRequest, "Base.1.0.PropertyValueNotInList", err.Error())
	case ecode.State:
		redfishError(w, http.StatusConflict, "Base.1.0.ActionNotSupported", err.Error())
	default:
		redfishError(w, http.StatusInternalServerError, "Base.1.0.InternalError", what+" failed: "+err.Error())
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(status)
	w.Write(data)
}

// redfishError writes Redfish's error body.
func redfishError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code":    code,
		"message": msg,
		"@Message.ExtendedInfo": []any{map[string]any{
			"MessageId": code,
			"Message":   msg,
			"Severity":  "Warning",
		}},
	}})
}

var errUnknownTarget = errors.New("unknown boot override target")

// bootTarget maps a Redfish BootSourceOverrideTarget to a boot device.
func bootTarget(t string) (string, error) {
	if dev, ok := bootTargets[t]; ok {
		return dev, nil
	}
	return "", fmt.Errorf("%w %q", errUnknownTarget, t)
}

// redfishTarget maps a boot device back to BootSourceOverrideTarget.
func redfishTarget(dev string) string {
	for t, d := range bootTargets {
		if d == dev {
			return t
		}
	}
	return "None"
}
