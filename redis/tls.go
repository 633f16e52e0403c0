package redis

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
)

// TLS, the operator's side of spec.tls (docs/security.md): the client configuration it
// dials every node with, and the reload of a renewed certificate with no restart.

// TLSMaterial is the PEM content of a Secret in the cert-manager layout.
type TLSMaterial struct {
	// Cert is tls.crt: the instances' certificate (first) and any intermediates.
	Cert []byte
	// Key is tls.key, Cert's private key.
	Key []byte
	// CA is ca.crt: the CA certificates the instances trust, and the operator too.
	CA []byte
}

// Hash identifies the material: the first 16 hex digits of the sha256 of its three
// files, never the key itself.
func (m TLSMaterial) Hash() string {
	h := sha256.New()
	for _, b := range [][]byte{m.Cert, m.Key, m.CA} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Leaf is the first certificate of Cert, the one the instances serve.
func (m TLSMaterial) Leaf() (*x509.Certificate, error) {
	pair, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(pair.Certificate[0])
}

// ClientTLSConfig is the configuration the operator dials the instances with: it trusts
// CA only and presents Cert (the instances ask for a client certificate unless
// spec.tls.clientAuth is None). The chain is verified, not the name: the operator dials
// pod IPs, which certificates rarely hold, and Redis checks its peers the same way.
func ClientTLSConfig(m TLSMaterial) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, fmt.Errorf("tls.crt and tls.key: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(m.CA) {
		return nil, errors.New("ca.crt: no PEM certificate")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		// The default verification would also check the name; VerifyConnection checks
		// the chain against ca.crt instead.
		InsecureSkipVerify: true, //nolint:gosec // the chain is verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, roots)
		},
	}, nil
}

// verifyChain checks that the peer's certificate chains up to roots, for any usage (as
// Redis does: a certificate without extended key usages serves both sides).
func verifyChain(peer []*x509.Certificate, roots *x509.CertPool) error {
	if len(peer) == 0 {
		return errors.New("the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range peer[1:] {
		inter.AddCert(c)
	}
	_, err := peer[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// ServedCertificate is the certificate the node at addr presents, read with a TLS
// handshake and nothing else (no command, no AUTH).
func ServedCertificate(ctx context.Context, addr string, cfg *tls.Config) (*x509.Certificate, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to read the certificate of %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	peer := conn.(*tls.Conn).ConnectionState().PeerCertificates
	return peer[0], nil
}

// SerialHex is a certificate's serial number as status.tls.serial shows it.
func SerialHex(c *x509.Certificate) string { return strings.ToUpper(c.SerialNumber.Text(16)) }

// ReloadTLS makes the node read its certificate, key and CA files again: CONFIG SET of
// tls-cert-file to the path it already has. Redis (6.0 to 7.x, checked on 7.0.15) loads
// all three files again on any CONFIG SET of a tls-* file directive, even to the same
// value, and keeps serving the old ones if the new ones do not load (a key that does not
// match, a file half written), in which case the error says so.
func (a *admin) ReloadTLS(ctx context.Context) error {
	cur, err := a.c.ConfigGet(ctx, "tls-cert-file").Result()
	if err != nil {
		return fmt.Errorf("failed to read tls-cert-file of %s: %w", a.addr, err)
	}
	if len(cur) != 2 || fmt.Sprint(cur[1]) == "" {
		return fmt.Errorf("failed to reload the certificate of %s: it has no tls-cert-file", a.addr)
	}
	if err := a.c.ConfigSet(ctx, "tls-cert-file", fmt.Sprint(cur[1])).Err(); err != nil {
		return fmt.Errorf("failed to reload the certificate of %s: %w", a.addr, err)
	}
	return nil
}

// ReloadCertificates brings every node at addrs to the certificate want: a node that
// already serves it is left alone, any other is asked to reload its files. It returns
// the nodes that still serve another certificate after the reload, each with why (their
// mounted files have not been refreshed yet); the caller looks again later.
func ReloadCertificates(ctx context.Context, f Factory, cfg *tls.Config, addrs []string, want *x509.Certificate) (stale []string, err error) {
	for _, addr := range addrs {
		served, err := ServedCertificate(ctx, addr, cfg)
		if err != nil {
			return nil, err
		}
		if served.Equal(want) {
			continue
		}
		// A reload Redis refuses (the mounted key does not match the certificate yet:
		// the files are being refreshed) leaves the node serving the old pair.
		if err := f.For(addr).ReloadTLS(ctx); err != nil {
			stale = append(stale, fmt.Sprintf("%s (%v)", addr, err))
			continue
		}
		if served, err = ServedCertificate(ctx, addr, cfg); err != nil {
			return nil, err
		}
		if !served.Equal(want) {
			stale = append(stale, addr+" (its mounted files still hold serial "+SerialHex(served)+")")
		}
	}
	return stale, nil
}
