package apifront

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certLoader serves the key pair from its files and reloads it when either
// file's modification time changes.
type certLoader struct {
	cert, key string

	mu     sync.Mutex
	loaded *tls.Certificate
	stamp  [2]time.Time
}

func (c *certLoader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	st1, err1 := os.Stat(c.cert)
	st2, err2 := os.Stat(c.key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err1 == nil && err2 == nil {
		stamp := [2]time.Time{st1.ModTime(), st2.ModTime()}
		if c.loaded == nil || stamp != c.stamp {
			kp, err := tls.LoadX509KeyPair(c.cert, c.key)
			if err != nil {
				if c.loaded != nil {
					return c.loaded, nil // keep serving while a renewal is half-written
				}
				return nil, fmt.Errorf("loading TLS key pair: %w", err)
			}
			c.loaded, c.stamp = &kp, stamp
		}
	}
	if c.loaded == nil {
		if err1 == nil {
			err1 = err2
		}
		return nil, fmt.Errorf("loading TLS key pair: %w", err1)
	}
	return c.loaded, nil
}
