package agent

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/corral/corral/internal/baremetal/agentapi"
)

// Backoff of the lookup: the API may not answer (404) until the conductor
// has put the machine in a state that waits for its agent.
const (
	lookupFirstRetry = 1 * time.Second
	lookupMaxRetry   = 30 * time.Second
	// heartbeatRetry is how soon a failed heartbeat is retried.
	heartbeatRetry = 5 * time.Second
)

// Run is the agent's life for one boot: network, lookup, heartbeats and the
// command API until finalize_rescue or ctx ends. After finalize_rescue the
// command API stays closed, the network is reconfigured and, unless
// s.SSHPort is 0, the rescue user's SSH server runs until ctx ends; then
// Run returns nil. With s.OfflineRescue there is no API: the rescue user
// comes from EtcDir's OfflineRescueFile, then the network and SSH follow.
func Run(ctx context.Context, s Settings, m *Machine) error {
	logger := log.New(m.Console, "corral-agent: ", 0)
	if s.OfflineRescue {
		return runOfflineRescue(ctx, s, m, logger)
	}
	if s.APIURL == "" {
		return errors.New("no ipa-api-url on the kernel command line")
	}
	macs, addr, err := m.Net.Up()
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	logger.Printf("network up: macs %v, address %q", macs, addr)

	api := &apiClient{base: s.APIURL, hc: newHTTPClient(s.APICertSHA256, 60*time.Second)}
	api.negotiate(ctx)
	reply, err := lookupUntilFound(ctx, api, macs, logger)
	if err != nil {
		return err
	}
	uuid, token := reply.Node.UUID, reply.Config.AgentToken
	logger.Printf("machine %s found (heartbeat timeout %ds)", uuid, reply.Config.HeartbeatTimeout)

	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(s.ListenPort)))
	if err != nil {
		return fmt.Errorf("command API: %w", err)
	}
	srv := NewServer(m, token, newHTTPClient(s.APICertSHA256, 0), logger)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	host, port := s.AdvertiseHost, s.AdvertisePort
	if host == "" {
		host = addr
	}
	if port == 0 {
		port = s.ListenPort
	}
	callback := "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	hbCtx, stopHeartbeats := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		heartbeatLoop(hbCtx, api, uuid, callback, token, reply.Config.HeartbeatTimeout, logger)
	}()
	logger.Printf("serving commands on port %d, callback %s", s.ListenPort, callback)

	select {
	case <-srv.Rescued():
	case err := <-served:
		stopHeartbeats()
		<-hbDone
		return fmt.Errorf("command API: %w", err)
	case <-ctx.Done():
	}
	stopHeartbeats()
	<-hbDone
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shut); err != nil {
		hs.Close()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	logger.Printf("rescue finalized: command API stopped; running DHCP again for the tenant network")
	if err := m.Net.Redo(); err != nil {
		logger.Printf("DHCP after rescue: %v", err)
	}
	if s.SSHPort == 0 {
		logger.Printf("RESCUE-READY: log in as %q on the console", RescueUser)
		return nil
	}
	serveRescueSSH(ctx, s.SSHPort, m, logger)
	return nil
}

// serveRescueSSH runs the rescue SSH server until ctx ends. A server that
// cannot start leaves the console login: the rescue itself has succeeded.
func serveRescueSSH(ctx context.Context, port int, m *Machine, logger *log.Logger) {
	srv, err := NewRescueSSH(m, logger)
	if err != nil {
		logger.Printf("RESCUE-READY: log in as %q on the console; no SSH server: %v", RescueUser, err)
		return
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		logger.Printf("RESCUE-READY: log in as %q on the console; no SSH server: %v", RescueUser, err)
		return
	}
	logger.Printf("RESCUE-SSH: port %d, host key %s %s", port, srv.HostKey().Type(), srv.Fingerprint())
	logger.Printf("RESCUE-READY: log in as %q on the console or with ssh", RescueUser)
	if err := srv.Serve(ctx, ln); err != nil {
		logger.Printf("ssh: %v", err)
	}
}

// lookupUntilFound retries the lookup with a doubling delay until the API
// answers it.
func lookupUntilFound(ctx context.Context, api *apiClient, macs []string, logger *log.Logger) (*agentapi.LookupReply, error) {
	delay := lookupFirstRetry
	for {
		r, err := api.lookup(ctx, macs)
		if err == nil {
			return r, nil
		}
		logger.Printf("%v; retrying in %s", err, delay)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, lookupMaxRetry)
	}
}

// heartbeatInterval is a third of the API's heartbeat timeout, so two
// heartbeats may be lost before the conductor gives up.
func heartbeatInterval(timeout int) time.Duration {
	if timeout <= 0 {
		timeout = 300
	}
	return max(time.Duration(timeout)*time.Second/3, time.Second)
}

func heartbeatLoop(ctx context.Context, api *apiClient, uuid, callback, token string, timeout int, logger *log.Logger) {
	interval := heartbeatInterval(timeout)
	hb := agentapi.Heartbeat{CallbackURL: callback, AgentToken: token,
		AgentVersion: agentapi.AgentVersion, AgentStatus: agentapi.AgentStatusStart}
	for n := 0; ; n++ {
		next := interval
		if err := api.heartbeat(ctx, uuid, hb); err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Printf("%v", err)
			next = min(interval, heartbeatRetry)
		} else if n == 0 {
			logger.Printf("first heartbeat accepted; next every %s", interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}
