package baremetalapi

import (
	"errors"
	"flag"
	"fmt"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/cryptpw"
)

// DefaultPort is Ironic's port.
const DefaultPort = 6385

// NewLuxiBackend builds the backend that asks corrald over LUXI. It is set
// by the package that implements it; until then the API cannot be enabled.
var NewLuxiBackend func(pool *apifront.LuxiPool) Backend

// Registration is the Bare Metal API's place in the API front. It is off
// unless --baremetal-port is set.
var Registration = apifront.Registration{Name: serviceName, Flags: declareFlags, OffAtPortZero: true}

const serviceName = "Bare Metal API"

func declareFlags(fs *flag.FlagSet) (*apifront.Listen, func(apifront.Env) (*apifront.Service, error)) {
	listen := apifront.ListenFlags(fs, "baremetal-", "Bare Metal API (0: off)", apifront.Listen{
		Port: 0, CertFile: "/var/lib/corral/rapi/rapi.crt", KeyFile: "/var/lib/corral/rapi/rapi.key",
	})
	auth := fs.String("baremetal-auth", "http_basic", "Bare Metal API: authentication, http_basic (bcrypt htpasswd file) or noauth")
	htpasswd := fs.String("baremetal-htpasswd", "/var/lib/corral/rapi/baremetal.htpasswd",
		"Bare Metal API: htpasswd file of bcrypt entries (user:$2y$...) for http_basic; re-read on SIGHUP")
	rescueHash := fs.String("baremetal-rescue-hash", string(cryptpw.Default),
		"Bare Metal API: crypt algorithm the rescue password is hashed with, sha256 or sha512 (Ironic's rescue_password_hash_algorithm)")
	maxClients := fs.Int("baremetal-max-clients", 20, "Bare Metal API: requests served at once; more get 503")
	return listen, func(env apifront.Env) (*apifront.Service, error) {
		if listen.Port == 0 {
			return nil, nil
		}
		if *maxClients < 1 {
			return nil, errors.New("--baremetal-max-clients must be at least 1")
		}
		alg, err := cryptpw.ParseAlgorithm(*rescueHash)
		if err != nil {
			return nil, fmt.Errorf("--baremetal-rescue-hash: %w", err)
		}
		if NewLuxiBackend == nil {
			return nil, errors.New("the Bare Metal API's corrald backend is not part of this build; leave --baremetal-port at 0")
		}
		svc, err := NewService(*listen, ServiceOptions{Auth: *auth, HTPasswd: *htpasswd, MaxClients: *maxClients, RescueHash: alg},
			NewLuxiBackend(env.LUXI), env)
		if err != nil {
			return nil, err
		}
		return svc, nil
	}
}

// ServiceOptions are the API's settings besides its listener.
type ServiceOptions struct {
	Auth       string // http_basic or noauth
	HTPasswd   string // bcrypt htpasswd file, for http_basic
	MaxClients int
	RescueHash cryptpw.Algorithm
}

// NewService builds the API's service: its handler with the
// authentication strategy named (http_basic with the htpasswd file, or
// noauth) and, for http_basic, the reload of the file on SIGHUP.
func NewService(listen apifront.Listen, o ServiceOptions, be Backend, env apifront.Env) (*apifront.Service, error) {
	strategy, htpasswdFile := o.Auth, o.HTPasswd
	cfg := Config{Backend: be, MaxClients: o.MaxClients, RescueHash: o.RescueHash, Log: env.Log}
	var reload func() error
	started := []any{"auth", strategy}
	switch strategy {
	case "noauth":
		cfg.Auth = &apifront.NoAuth{As: apifront.Identity{Name: "noauth"}}
	case "http_basic":
		file, err := apifront.LoadHTPasswd(htpasswdFile)
		if err != nil {
			return nil, err
		}
		a := apifront.NewHTPasswdAuth(Realm, file)
		cfg.Auth = a
		reload = func() error {
			f, err := apifront.LoadHTPasswd(htpasswdFile)
			if err != nil {
				return err
			}
			a.Set(f)
			if env.Log != nil {
				env.Log.Info("baremetal htpasswd file reloaded", "users", f.Len())
			}
			return nil
		}
		started = append(started, "users", file.Len())
	default:
		return nil, fmt.Errorf("--baremetal-auth %q: want http_basic or noauth", strategy)
	}
	return &apifront.Service{Name: serviceName, Handler: NewHandler(cfg), Listen: listen, Reload: reload, Started: started}, nil
}
