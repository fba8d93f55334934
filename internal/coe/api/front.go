package api

import (
	"errors"
	"flag"
	"fmt"

	"github.com/corral/corral/internal/apifront"
)

// DefaultPort is Magnum's port.
const DefaultPort = 9511

// Registration is the Container Infra API's place in the API front. It is
// off unless --coe-port is set (DefaultPort is Magnum's).
var Registration = apifront.Registration{Name: serviceName, Flags: declareFlags, OffAtPortZero: true}

const serviceName = "Container Infra API"

func declareFlags(fs *flag.FlagSet) (*apifront.Listen, func(apifront.Env) (*apifront.Service, error)) {
	listen := apifront.ListenFlags(fs, "coe-", fmt.Sprintf("Container Infra API (Magnum's is %d; 0: off)", DefaultPort), apifront.Listen{
		Port: 0, CertFile: "/var/lib/corral/rapi/rapi.crt", KeyFile: "/var/lib/corral/rapi/rapi.key",
	})
	auth := fs.String("coe-auth", "http_basic", "Container Infra API: authentication, http_basic (users file) or noauth")
	users := fs.String("coe-users", "/var/lib/corral/rapi/coe.users",
		"Container Infra API: users file for http_basic, one name:bcrypt-hash:project-id[:admin] a line; re-read on SIGHUP")
	project := fs.String("coe-noauth-project", "admin", "Container Infra API: the project every request acts in under noauth (as an administrator)")
	maxClients := fs.Int("coe-max-clients", 20, "Container Infra API: requests served at once; more get 503")
	return listen, func(env apifront.Env) (*apifront.Service, error) {
		if listen.Port == 0 {
			return nil, nil
		}
		if *maxClients < 1 {
			return nil, errors.New("--coe-max-clients must be at least 1")
		}
		return NewService(*listen, ServiceOptions{Auth: *auth, Users: *users, NoAuthProject: *project, MaxClients: *maxClients},
			NewLuxiBackend(env.LUXI), env)
	}
}

// ServiceOptions are the API's settings besides its listener.
type ServiceOptions struct {
	Auth          string // http_basic or noauth
	Users         string // users file, for http_basic
	NoAuthProject string // the project of noauth's caller
	MaxClients    int
}

// NewService builds the API's service with the authentication strategy
// named and, for http_basic, the reload of the users file on SIGHUP.
func NewService(listen apifront.Listen, o ServiceOptions, be Backend, env apifront.Env) (*apifront.Service, error) {
	cfg := Config{Backend: be, MaxClients: o.MaxClients, Log: env.Log}
	var reload func() error
	started := []any{"auth", o.Auth}
	switch o.Auth {
	case "noauth":
		if o.NoAuthProject == "" {
			return nil, errors.New("--coe-noauth-project must not be empty")
		}
		cfg.Auth = NoAuth{As: Caller{User: "noauth", Project: o.NoAuthProject, Admin: true}}
	case "http_basic":
		users, err := LoadUsers(o.Users)
		if err != nil {
			return nil, err
		}
		a := NewBasicAuth(users)
		cfg.Auth = a
		reload = func() error {
			u, err := LoadUsers(o.Users)
			if err != nil {
				return err
			}
			a.Set(u)
			if env.Log != nil {
				env.Log.Info("container infra users file reloaded", "users", u.Len())
			}
			return nil
		}
		started = append(started, "users", users.Len())
	default:
		return nil, fmt.Errorf("--coe-auth %q: want http_basic or noauth", o.Auth)
	}
	return &apifront.Service{Name: serviceName, Handler: NewHandler(cfg), Listen: listen, Reload: reload, Started: started}, nil
}
