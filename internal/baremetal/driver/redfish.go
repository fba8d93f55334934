package driver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// RedfishClient drives a BMC over Redfish (HTTPS, basic authentication).
// Each client has its own transport, so connections never outlive the
// driver made for one action.
type RedfishClient struct {
	base               *url.URL // scheme://host[:port]
	systemID           string   // path of the ComputerSystem, "" until found
	username, password string
	client             *http.Client
	poll               time.Duration
}

func newRedfish(info map[string]any) (*RedfishClient, error) {
	addr, err := infoString(info, "redfish_address", true)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, ecode.Errorf(ecode.Inval, "driver_info redfish_address %q is not an http(s) URL of a host (credentials go in redfish_username/redfish_password)", redactURL(addr))
	}
	d := &RedfishClient{base: &url.URL{Scheme: u.Scheme, Host: u.Host}, poll: time.Second}
	if d.systemID, err = infoString(info, "redfish_system_id", false); err != nil {
		return nil, err
	}
	if d.systemID != "" && !strings.HasPrefix(d.systemID, "/") {
		return nil, ecode.Errorf(ecode.Inval, "driver_info redfish_system_id %q must be a path such as /redfish/v1/Systems/1", d.systemID)
	}
	if d.username, err = infoString(info, "redfish_username", false); err != nil {
		return nil, err
	}
	if d.password, err = infoString(info, "redfish_password", false); err != nil {
		return nil, err
	}
	verify, caFile, err := verifyCA(info, "redfish_verify_ca")
	if err != nil {
		return nil, err
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !verify}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, ecode.Errorf(ecode.Inval, "driver_info redfish_verify_ca: cannot read %s: %w", caFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, ecode.Errorf(ecode.Inval, "driver_info redfish_verify_ca: %s holds no PEM certificate", caFile)
		}
		tlsConf.RootCAs = pool
	}
	d.client = &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConf, Proxy: http.ProxyFromEnvironment, MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second},
		// A redirect would resend the credentials elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return d, nil
}

func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// do sends one request to path and decodes a JSON reply into out (when not
// nil). Non-2xx answers become errors carrying Redfish's message.
func (d *RedfishClient) do(ctx context.Context, method, path string, body, out any) error {
	ref, err := url.Parse(path)
	if err != nil || ref.IsAbs() || ref.Host != "" {
		return ecode.ExecErrorf("redfish service gave the link %q, not a path on %s", path, d.base.Host)
	}
	target := d.base.ResolveReference(ref)
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("redfish request body: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, target.String(), rd)
	if err != nil {
		return fmt.Errorf("redfish request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OData-Version", "4.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if d.username != "" || d.password != "" {
		req.SetBasicAuth(d.username, d.password)
	}
	red := redactor{d.password}
	resp, err := d.client.Do(req)
	if err != nil {
		return red.errorf("redfish %s %s: %w", method, target.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return red.errorf("redfish %s %s: reading the answer: %w", method, target.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return d.statusError(method, target.Path, resp.StatusCode, data)
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return ecode.ExecErrorf("redfish %s %s: the answer is not the JSON expected: %w", method, target.Path, err)
	}
	return nil
}

// statusError turns an HTTP error answer into an error with Redfish's own
// message, without echoing anything secret.
func (d *RedfishClient) statusError(method, path string, status int, body []byte) error {
	var e struct {
		Error struct {
			Code     string `json:"code"`
			Message  string `json:"message"`
			Extended []struct {
				Message string `json:"Message"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	msg := http.StatusText(status)
	if json.Unmarshal(body, &e) == nil {
		if len(e.Error.Extended) > 0 && e.Error.Extended[0].Message != "" {
			msg = e.Error.Extended[0].Message
		} else if e.Error.Message != "" {
			msg = e.Error.Message
		}
	}
	msg = redactor{d.password}.clean(truncate(msg, 300))
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return ecode.ExecErrorf("redfish %s %s: the BMC refused the credentials (HTTP %d)", method, path, status)
	case http.StatusNotFound:
		return ecode.New(ecode.OpExecError, ecode.NoEnt, fmt.Sprintf("redfish %s %s: not found (HTTP 404): %s", method, path, msg))
	case http.StatusBadRequest:
		return ecode.New(ecode.OpExecError, ecode.Inval, fmt.Sprintf("redfish %s %s: the BMC refused the request (HTTP 400): %s", method, path, msg))
	}
	return ecode.ExecErrorf("redfish %s %s: HTTP %d: %s", method, path, status, msg)
}

type odataRef struct {
	ID string `json:"@odata.id"`
}

type redfishSystem struct {
	PowerState string `json:"PowerState"`
	Boot       struct {
		Target  string `json:"BootSourceOverrideTarget"`
		Enabled string `json:"BootSourceOverrideEnabled"`
	} `json:"Boot"`
	Actions struct {
		Reset struct {
			Target string `json:"target"`
		} `json:"#ComputerSystem.Reset"`
	} `json:"Actions"`
	Links struct {
		ManagedBy []odataRef `json:"ManagedBy"`
	} `json:"Links"`
}

// system finds (once) and reads the machine's ComputerSystem.
func (d *RedfishClient) system(ctx context.Context) (redfishSystem, error) {
	if d.systemID == "" {
		var coll struct {
			Members []odataRef `json:"Members"`
		}
		if err := d.do(ctx, http.MethodGet, "/redfish/v1/Systems", nil, &coll); err != nil {
			return redfishSystem{}, err
		}
		if len(coll.Members) != 1 {
			return redfishSystem{}, ecode.Errorf(ecode.Inval, "the Redfish service has %d systems: driver_info redfish_system_id must name one", len(coll.Members))
		}
		d.systemID = coll.Members[0].ID
	}
	var s redfishSystem
	err := d.do(ctx, http.MethodGet, d.systemID, nil, &s)
	return s, err
}

func (d *RedfishClient) Validate(ctx context.Context) error {
	_, err := d.system(ctx)
	return err
}

// redfishPower maps Redfish's PowerState; a machine powering on counts as
// on, one powering off as off.
var redfishPower = map[string]string{"On": PowerOn, "PoweringOn": PowerOn, "Off": PowerOff, "PoweringOff": PowerOff}

func (d *RedfishClient) PowerState(ctx context.Context) (string, error) {
	s, err := d.system(ctx)
	if err != nil {
		return "", err
	}
	p, ok := redfishPower[s.PowerState]
	if !ok {
		return "", ecode.ExecErrorf("redfish system %s reports power state %q", d.systemID, truncate(s.PowerState, 40))
	}
	return p, nil
}

func (d *RedfishClient) SetPower(ctx context.Context, target string, timeout time.Duration) error {
	if err := checkPowerTarget(target); err != nil {
		return err
	}
	if timeout <= 0 {
		timeout = DefaultPowerTimeout
	}
	s, err := d.system(ctx)
	if err != nil {
		return err
	}
	on := redfishPower[s.PowerState] == PowerOn
	var resetType, want string
	switch target {
	case PowerOn:
		resetType, want = "On", PowerOn
	case PowerOff:
		resetType, want = "ForceOff", PowerOff
	case SoftPowerOff:
		resetType, want = "GracefulShutdown", PowerOff
	case Rebooting:
		resetType, want = "ForceRestart", PowerOn
		if !on {
			resetType = "On"
		}
	case SoftRebooting:
		resetType, want = "GracefulRestart", PowerOn
		if !on {
			resetType = "On"
		}
	}
	if (want == PowerOff && !on) || (target == PowerOn && on) {
		return nil
	}
	action := s.Actions.Reset.Target
	if action == "" {
		action = d.systemID + "/Actions/ComputerSystem.Reset"
	}
	if err := d.do(ctx, http.MethodPost, action, map[string]string{"ResetType": resetType}, nil); err != nil {
		return err
	}
	return waitPower(ctx, d.PowerState, want, timeout, d.poll)
}

var redfishBootTargets = map[string]string{BootPXE: "Pxe", BootCDROM: "Cd", BootDisk: "Hdd", BootBIOS: "BiosSetup"}

func (d *RedfishClient) SetBootDevice(ctx context.Context, dev string, persistent bool) error {
	if err := checkBootDevice(dev); err != nil {
		return err
	}
	if _, err := d.system(ctx); err != nil {
		return err
	}
	enabled := "Once"
	if persistent {
		enabled = "Continuous"
	}
	body := map[string]any{"Boot": map[string]string{
		"BootSourceOverrideTarget":  redfishBootTargets[dev],
		"BootSourceOverrideEnabled": enabled,
	}}
	return d.do(ctx, http.MethodPatch, d.systemID, body, nil)
}

func (d *RedfishClient) BootDevice(ctx context.Context) (string, error) {
	s, err := d.system(ctx)
	if err != nil {
		return "", err
	}
	if s.Boot.Enabled == "Disabled" || s.Boot.Target == "None" || s.Boot.Target == "" {
		return "", nil
	}
	for dev, t := range redfishBootTargets {
		if t == s.Boot.Target {
			return dev, nil
		}
	}
	return "", ecode.ExecErrorf("redfish system %s boots from %q, which Corral does not know", d.systemID, truncate(s.Boot.Target, 40))
}

type redfishVirtualMedia struct {
	MediaTypes []string `json:"MediaTypes"`
	Actions    struct {
		Insert struct {
			Target string `json:"target"`
		} `json:"#VirtualMedia.InsertMedia"`
		Eject struct {
			Target string `json:"target"`
		} `json:"#VirtualMedia.EjectMedia"`
	} `json:"Actions"`
}

// virtualCD finds the CD (or DVD) drive among the virtual media of the
// managers of the system.
func (d *RedfishClient) virtualCD(ctx context.Context) (redfishVirtualMedia, error) {
	s, err := d.system(ctx)
	if err != nil {
		return redfishVirtualMedia{}, err
	}
	for _, mgr := range s.Links.ManagedBy {
		var m struct {
			VirtualMedia odataRef `json:"VirtualMedia"`
		}
		if err := d.do(ctx, http.MethodGet, mgr.ID, nil, &m); err != nil {
			return redfishVirtualMedia{}, err
		}
		if m.VirtualMedia.ID == "" {
			continue
		}
		var coll struct {
			Members []odataRef `json:"Members"`
		}
		if err := d.do(ctx, http.MethodGet, m.VirtualMedia.ID, nil, &coll); err != nil {
			return redfishVirtualMedia{}, err
		}
		for _, member := range coll.Members {
			var vm redfishVirtualMedia
			if err := d.do(ctx, http.MethodGet, member.ID, nil, &vm); err != nil {
				return redfishVirtualMedia{}, err
			}
			if contains(vm.MediaTypes, "CD") || contains(vm.MediaTypes, "DVD") {
				if vm.Actions.Insert.Target == "" || vm.Actions.Eject.Target == "" {
					return redfishVirtualMedia{}, ecode.ExecErrorf("redfish virtual media %s has no InsertMedia/EjectMedia actions", member.ID)
				}
				return vm, nil
			}
		}
	}
	return redfishVirtualMedia{}, ecode.Errorf(ecode.State, "redfish system %s has no virtual CD", d.systemID)
}

func (d *RedfishClient) InsertCD(ctx context.Context, image string) error {
	if image == "" {
		return ecode.Errorf(ecode.Inval, "virtual media needs an image URL")
	}
	vm, err := d.virtualCD(ctx)
	if err != nil {
		return err
	}
	body := map[string]any{"Image": image, "Inserted": true, "WriteProtected": true}
	return d.do(ctx, http.MethodPost, vm.Actions.Insert.Target, body, nil)
}

func (d *RedfishClient) EjectCD(ctx context.Context) error {
	vm, err := d.virtualCD(ctx)
	if err != nil {
		return err
	}
	return d.do(ctx, http.MethodPost, vm.Actions.Eject.Target, map[string]any{}, nil)
}
