package rapi

import (
	"errors"
	"flag"
	"time"

	"github.com/corral/corral/internal/apifront"
)

// DefaultPort is Ganeti's RAPI port.
const DefaultPort = 5080

// writeTimeout is longer than one /2/jobs/[id]/wait.
const writeTimeout = 120 * time.Second

// Registration is the RAPI's place in the API front: it is corral-rapi's
// main API, so its flags carry no prefix.
var Registration = apifront.Registration{Name: "RAPI", Flags: declareFlags}

func declareFlags(fs *flag.FlagSet) (*apifront.Listen, func(apifront.Env) (*apifront.Service, error)) {
	listen := apifront.ListenFlags(fs, "", "RAPI", apifront.Listen{
		Port: DefaultPort, CertFile: "/var/lib/corral/rapi/rapi.crt", KeyFile: "/var/lib/corral/rapi/rapi.key",
	})
	usersFile := fs.String("users", "/var/lib/corral/rapi/users", "RAPI users file (Ganeti's format); re-read on SIGHUP")
	requireAuth := fs.Bool("require-authentication", false, "RAPI: require credentials on every request, GETs included")
	maxClients := fs.Int("max-clients", 20, "RAPI: requests served at once; more get 503")
	return listen, func(env apifront.Env) (*apifront.Service, error) {
		if *maxClients < 1 {
			return nil, errors.New("--max-clients must be at least 1")
		}
		users, err := LoadUsers(*usersFile)
		if err != nil {
			return nil, err
		}
		h := NewHandler(Config{
			Backend: NewLuxiBackend(env.LUXI), Users: users,
			RequireAuth: *requireAuth, MaxClients: *maxClients, Log: env.Log,
		})
		reload := func() error {
			u, err := LoadUsers(*usersFile)
			if err != nil {
				return err
			}
			h.SetUsers(u)
			env.Log.Info("users file reloaded", "users", u.Len())
			return nil
		}
		return &apifront.Service{
			Name: "RAPI", Handler: h, Listen: *listen, WriteTimeout: writeTimeout, Reload: reload,
			Started: []any{"users", users.Len(), "require_authentication", *requireAuth},
		}, nil
	}
}
