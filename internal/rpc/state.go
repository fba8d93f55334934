package rpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
)

// epochStore is the node's durable memory of the highest master epoch it has
// seen. It must survive restarts: otherwise a deposed master could act again
// after a node daemon restart.
type epochStore struct {
	mu   sync.Mutex
	path string
	cur  int64
}

func openEpoch(path string) (*epochStore, error) {
	s := &epochStore{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read epoch: %w", err)
	}
	n, err := parseEpochFile(b)
	if err != nil {
		// Starting at 0 would let any old master back in.
		return nil, fmt.Errorf("epoch file %s: %w", path, err)
	}
	s.cur = n
	return s, nil
}

func parseEpochFile(b []byte) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("not a non-negative integer")
	}
	return n, nil
}

func (s *epochStore) get() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// admit fences a call: a lower epoch is refused; a higher one is allowed
// only when raise (called under the lock, only then) accepts it, and is
// written to disk before the call may run. Refusals never name the
// current epoch: a caller that is refused must not learn what to send.
func (s *epochStore) admit(epoch int64, raise func(cur int64) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch < s.cur {
		return errStaleEpoch
	}
	if epoch == s.cur {
		return nil
	}
	if err := raise(s.cur); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(s.path, []byte(strconv.FormatInt(epoch, 10)+"\n"), 0o600); err != nil {
		return &ecode.Error{Kind: ecode.RemoteError, Class: ecode.Environ, Msg: "cannot record master epoch: " + err.Error(), Err: err}
	}
	s.cur = epoch
	return nil
}

// errStaleEpoch is what a caller with an older epoch is told.
var errStaleEpoch = ecode.New(ecode.RemoteError, ecode.State, "stale master epoch: a newer master has taken over this node")

// opRecord is a finished operation's answer, replayed to retries.
type opRecord struct {
	Method string          `json:"method"`
	Op     string          `json:"op"`
	Time   time.Time       `json:"time"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// opStore keeps operation records, one file per (method, operation id).
type opStore struct {
	dir string
	ttl time.Duration
	now func() time.Time

	mu       sync.Mutex
	inflight map[string]chan struct{}

	onWait func() // test hook: a duplicate starts waiting for the first
}

func newOpStore(dir string, ttl time.Duration) (*opStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("operation records: %w", err)
	}
	return &opStore{dir: dir, ttl: ttl, now: time.Now, inflight: make(map[string]chan struct{})}, nil
}

// opKey names a record. The method is part of the key so that two steps
// that by mistake share an id cannot answer for each other.
func opKey(method, op string) string {
	sum := sha256.Sum256([]byte(method + "\x00" + op))
	return hex.EncodeToString(sum[:])
}

func (s *opStore) path(key string) string { return filepath.Join(s.dir, key+".json") }

// begin returns the record of a finished operation, or claims the operation
// for the caller, who must call done when its answer is recorded (or when it
// gives up). A concurrent duplicate waits for the first to finish.
func (s *opStore) begin(ctx context.Context, key string) (rec *opRecord, done func(), err error) {
	for {
		s.mu.Lock()
		if ch, busy := s.inflight[key]; busy {
			s.mu.Unlock()
			if s.onWait != nil {
				s.onWait()
			}
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		rec, err := s.load(key)
		if err != nil || rec != nil {
			s.mu.Unlock()
			return rec, nil, err
		}
		ch := make(chan struct{})
		s.inflight[key] = ch
		s.mu.Unlock()
		return nil, func() {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			close(ch)
		}, nil
	}
}

func (s *opStore) load(key string) (*opRecord, error) {
	b, err := os.ReadFile(s.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read operation record: %w", err)
	}
	var rec opRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Status == 0 {
		// Records are written atomically, so this is damage from outside.
		// Running the operation again could do it twice: refuse instead.
		return nil, fmt.Errorf("operation record %s is corrupt", s.path(key))
	}
	if s.now().Sub(rec.Time) > s.ttl {
		os.Remove(s.path(key))
		return nil, nil
	}
	return &rec, nil
}

func (s *opStore) save(key string, rec opRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(s.path(key), b, 0o600)
}

// prune deletes records (and temporary files a crash left behind) older than
// the TTL. It reports how many files it removed.
func (s *opStore) prune() (int, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("prune operation records: %w", err)
	}
	cutoff := s.now().Add(-s.ttl)
	n := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || !info.ModTime().Before(cutoff) {
			continue
		}
		key := strings.TrimSuffix(e.Name(), ".json")
		s.mu.Lock()
		_, busy := s.inflight[key]
		if !busy && os.Remove(filepath.Join(s.dir, e.Name())) == nil {
			n++
		}
		s.mu.Unlock()
	}
	return n, nil
}
