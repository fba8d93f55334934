package luxi

import (
	"bufio"
	"net"
)

// NewClient makes a Client of a connection the caller opened (LUXI over
// TLS to a master's forward address, for instance); the Client owns nc
// from then on.
func NewClient(nc net.Conn) *Client {
	return &Client{nc: nc, br: bufio.NewReader(nc)}
}

// EncodeFailure is the failure reply a server sends for err, without its
// ETX: for relays that answer on a server's behalf when it cannot.
func EncodeFailure(err error) []byte { return encodeFailure(err) }
