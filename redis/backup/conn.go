// Package backup takes one consistent cut of every master of a Redis Cluster and streams
// each master's RDB (Take), and restores RDB files into a cluster of any shape (Restore).
package backup

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Dialer opens the raw connections a cut needs: a replication stream cannot go through a
// pooled client, since the connection becomes a replica's.
type Dialer struct {
	// User and Passwords authenticate as redis.authOnConnect does: AUTH user password for
	// each password in turn, then AUTH password (the default user). No password: no AUTH.
	User      string
	Passwords []string
	// TLS, when set, is what every connection dials with.
	TLS *tls.Config
	// Timeout bounds the dial and each reply of the command exchange.
	Timeout time.Duration
}

// conn is one connection speaking RESP by hand.
type conn struct {
	c       net.Conn
	r       *bufio.Reader
	addr    string
	timeout time.Duration
}

func (d Dialer) timeout() time.Duration {
	if d.Timeout == 0 {
		return 5 * time.Second
	}
	return d.Timeout
}

func (d Dialer) dial(ctx context.Context, addr string) (*conn, error) {
	nd := &net.Dialer{Timeout: d.timeout()}
	var c net.Conn
	var err error
	if d.TLS != nil {
		td := &tls.Dialer{NetDialer: nd, Config: d.TLS}
		c, err = td.DialContext(ctx, "tcp", addr)
	} else {
		c, err = nd.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to connect to %s: %w", addr, err)
	}
	cn := &conn{c: c, r: bufio.NewReaderSize(c, 1<<20), addr: addr, timeout: d.timeout()}
	if err := d.auth(cn); err != nil {
		c.Close()
		return nil, err
	}
	return cn, nil
}

func (d Dialer) auth(cn *conn) error {
	var err error
	for _, pw := range d.Passwords {
		if pw == "" {
			continue
		}
		if d.User != "" {
			if _, err = cn.do("AUTH", d.User, pw); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
				return err
			}
		}
		if _, err = cn.do("AUTH", pw); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
			return err
		}
	}
	return err
}

func (cn *conn) Close() error { return cn.c.Close() }

// send writes one command.
func (cn *conn) send(args ...string) error {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	_ = cn.c.SetWriteDeadline(time.Now().Add(cn.timeout))
	_, err := io.WriteString(cn.c, b.String())
	if err != nil {
		return fmt.Errorf("failed to send %s to %s: %w", args[0], cn.addr, err)
	}
	return nil
}

// redisError is an error reply.
type redisError string

func (e redisError) Error() string { return string(e) }

// maxBulk is the longest bulk reply the cut reads (INFO, CLUSTER NODES: a few hundred
// KB at most); a longer announced length is a broken or hostile server, not a buffer to
// allocate.
const maxBulk = 64 << 20

// reply reads one reply: a simple string, an integer or a bulk string as text; an error
// reply as a redisError. Arrays are not needed here.
func (cn *conn) reply() (string, error) {
	_ = cn.c.SetReadDeadline(time.Now().Add(cn.timeout))
	line, err := cn.line()
	if err != nil {
		return "", err
	}
	if line == "" {
		return "", fmt.Errorf("empty reply from %s", cn.addr)
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", redisError(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n > maxBulk {
			return "", fmt.Errorf("bad bulk length from %s: %q", cn.addr, line)
		}
		if n < 0 {
			return "", nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(cn.r, b); err != nil {
			return "", fmt.Errorf("failed to read a reply from %s: %w", cn.addr, err)
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply from %s: %q", cn.addr, line)
}

// config is CONFIG GET name's value: "" for a setting the server does not have.
func (cn *conn) config(name string) (string, error) {
	if err := cn.send("CONFIG", "GET", name); err != nil {
		return "", err
	}
	_ = cn.c.SetReadDeadline(time.Now().Add(cn.timeout))
	line, err := cn.line()
	if err != nil {
		return "", err
	}
	switch {
	case strings.HasPrefix(line, "-"):
		return "", redisError(line[1:])
	case !strings.HasPrefix(line, "*"):
		return "", fmt.Errorf("unexpected reply to CONFIG GET from %s: %q", cn.addr, line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 || n > 2 { // one parameter asked: its name and value
		return "", fmt.Errorf("bad array length from %s: %q", cn.addr, line)
	}
	vals := make([]string, n)
	for i := range vals {
		if vals[i], err = cn.reply(); err != nil {
			return "", err
		}
	}
	// name value pairs; the one asked for is the only pair (no pattern).
	if n < 2 {
		return "", nil
	}
	return vals[1], nil
}

func (cn *conn) line() (string, error) {
	line, err := cn.r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("failed to read a reply from %s: %w", cn.addr, err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func (cn *conn) do(args ...string) (string, error) {
	if err := cn.send(args...); err != nil {
		return "", err
	}
	return cn.reply()
}

// infoField is one "name:value" line of an INFO reply.
func infoField(info, name string) (string, bool) {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v, true
		}
	}
	return "", false
}

var errNoField = errors.New("field missing")
