package bmc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// qmpReply is one message from qemu's monitor: a greeting, a command's
// return or error, or an event (skipped).
type qmpReply struct {
	Greeting json.RawMessage `json:"QMP"`
	Return   json.RawMessage `json:"return"`
	Error    *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
}

// qmpDo runs one monitor command: connect, leave capabilities negotiation,
// execute, close. Chassis actions are rare, so no connection is kept.
func qmpDo(ctx context.Context, sock, command string, args any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("qmp connect: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	if _, err := qmpRead(r); err != nil {
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	if _, err := qmpCall(conn, r, "qmp_capabilities", nil); err != nil {
		return nil, err
	}
	return qmpCall(conn, r, command, args)
}

func qmpCall(conn net.Conn, r *bufio.Reader, command string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("qmp %s: %w", command, err)
	}
	if _, err := conn.Write(append(data, '\n')); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", command, err)
	}
	for {
		msg, err := qmpRead(r)
		if err != nil {
			return nil, fmt.Errorf("qmp %s: %w", command, err)
		}
		switch {
		case msg.Error != nil:
			return nil, fmt.Errorf("qmp %s: %s: %s", command, msg.Error.Class, msg.Error.Desc)
		case msg.Return != nil:
			return msg.Return, nil
		}
	}
}

func qmpRead(r *bufio.Reader) (qmpReply, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return qmpReply{}, err
	}
	var msg qmpReply
	if err := json.Unmarshal(line, &msg); err != nil {
		return qmpReply{}, fmt.Errorf("bad monitor message: %w", err)
	}
	if msg.Greeting == nil && msg.Return == nil && msg.Error == nil && msg.Event == "" {
		return qmpReply{}, errors.New("monitor message is neither greeting, return, error nor event")
	}
	return msg, nil
}
