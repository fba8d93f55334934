package agent

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"

	"github.com/corral/corral/internal/baremetal/agentapi"
)

// maxCommandBody bounds a command request.
const maxCommandBody = 1 << 20

// Server serves the agent's command API (/v1/commands) for one boot. Only
// requests carrying the boot's agent token are accepted. Commands that
// take long (prepare_image, erase_devices_metadata) run in the background,
// one at a time; the others run while the request waits.
type Server struct {
	m      *Machine
	token  string
	images *http.Client
	log    *log.Logger

	mu      sync.Mutex
	cmds    []*command
	byID    map[string]*command
	running *command // the asynchronous command in progress

	rescueOnce sync.Once
	rescued    chan struct{}
}

type command struct {
	res  agentapi.CommandResult
	done chan struct{}
	prog *progress
}

// NewServer returns the command server. token is the lookup's agent token
// ("" accepts any request: the API did not require one). images downloads
// images; logger writes to the console.
func NewServer(m *Machine, token string, images *http.Client, logger *log.Logger) *Server {
	return &Server{m: m, token: token, images: images, log: logger,
		byID: map[string]*command{}, rescued: make(chan struct{})}
}

// Rescued is closed once finalize_rescue has succeeded and its reply is
// sent: the agent must then stop serving.
func (s *Server) Rescued() <-chan struct{} { return s.rescued }

// ServeHTTP routes /v1/commands requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path != "/v1/commands" && !strings.HasPrefix(path, "/v1/commands/") {
		writeError(w, http.StatusNotFound, "NotFound", "no such resource")
		return
	}
	if !s.tokenOK(r.URL.Query().Get("agent_token")) {
		writeError(w, http.StatusUnauthorized, "Unauthorized", "invalid or missing agent token")
		return
	}
	wait := r.URL.Query().Get("wait") == "true"
	switch {
	case path == "/v1/commands" && r.Method == http.MethodPost:
		s.post(w, r, wait)
	case path == "/v1/commands" && r.Method == http.MethodGet:
		s.mu.Lock()
		l := agentapi.CommandList{Commands: make([]agentapi.CommandResult, 0, len(s.cmds))}
		for _, c := range s.cmds {
			l.Commands = append(l.Commands, c.res)
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, l)
	case r.Method == http.MethodGet:
		s.mu.Lock()
		c := s.byID[strings.TrimPrefix(path, "/v1/commands/")]
		s.mu.Unlock()
		if c == nil {
			writeError(w, http.StatusNotFound, "RequestedObjectNotFoundError", "no such command")
			return
		}
		if wait {
			select {
			case <-c.done:
			case <-r.Context().Done():
				return
			}
		}
		writeJSON(w, http.StatusOK, s.snapshot(c))
	default:
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "method not allowed")
	}
}

func (s *Server) tokenOK(got string) bool {
	if s.token == "" {
		return true
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// snapshot copies a command's result under the lock, with the progress of
// a running image write in its result.
func (s *Server) snapshot(c *command) agentapi.CommandResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := c.res
	if res.CommandStatus == agentapi.StatusRunning && c.prog != nil {
		res.CommandResult, _ = json.Marshal(map[string]int64{"bytes_downloaded": c.prog.n.Load()})
	}
	return res
}

// post starts a command.
func (s *Server) post(w http.ResponseWriter, r *http.Request, wait bool) {
	var req agentapi.CommandRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxCommandBody))
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "InvalidContentError", "the body is not a command")
		return
	}
	if len(req.Params) == 0 || string(req.Params) == "null" {
		req.Params = json.RawMessage("{}")
	}
	run, async, params, err := s.lookupCommand(req)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, errUnknownCommand) {
			code = http.StatusNotFound
		}
		writeError(w, code, "InvalidCommandError", err.Error())
		return
	}
	c := &command{done: make(chan struct{}), res: agentapi.CommandResult{
		ID: newID(), CommandName: shortName(req.Name), CommandParams: params,
		CommandStatus: agentapi.StatusRunning}}
	if req.Name == agentapi.CmdPrepareImage {
		c.prog = &progress{}
	}
	s.mu.Lock()
	if s.running != nil {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "AgentIsBusy", "another command is running: "+s.running.res.CommandName)
		return
	}
	if async {
		s.running = c
	}
	s.cmds = append(s.cmds, c)
	s.byID[c.res.ID] = c
	s.mu.Unlock()
	s.log.Printf("command %s (%s) started", req.Name, c.res.ID)

	var after func()
	if async {
		go func() {
			result, _, err := run(context.Background(), c)
			s.finish(c, result, err)
		}()
		if wait {
			select {
			case <-c.done:
			case <-r.Context().Done():
				return
			}
		}
	} else {
		var result any
		result, after, err = run(r.Context(), c)
		s.finish(c, result, err)
	}
	writeJSON(w, http.StatusOK, s.snapshot(c))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if after != nil {
		go after()
	}
}

// finish records a command's outcome.
func (s *Server) finish(c *command, result any, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		c.res.CommandStatus = agentapi.StatusFailed
		c.res.CommandError = &agentapi.CommandError{Type: "CommandExecutionError", Code: 500,
			Message: "Command execution failed", Details: err.Error()}
		s.log.Printf("command %s (%s) failed: %v", c.res.CommandName, c.res.ID, err)
	} else {
		c.res.CommandStatus = agentapi.StatusSucceeded
		if result != nil {
			c.res.CommandResult, _ = json.Marshal(result)
		}
		s.log.Printf("command %s (%s) succeeded", c.res.CommandName, c.res.ID)
	}
	if s.running == c {
		s.running = nil
	}
	close(c.done)
}

func shortName(name string) string {
	if _, cmd, ok := strings.Cut(name, "."); ok {
		return cmd
	}
	return name
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code, data = http.StatusInternalServerError, []byte(`{"type":"InternalError","code":500,"message":"cannot encode the reply"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, agentapi.ErrorReply{Type: typ, Code: code, Message: msg, Details: msg})
}

// close ends the boot's command service once finalize_rescue replied.
func (s *Server) closeRescued() { s.rescueOnce.Do(func() { close(s.rescued) }) }
