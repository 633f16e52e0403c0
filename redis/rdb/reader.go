package rdb

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The parser's primitives: bytes read through the running CRC64 (and a value's capture),
// RDB lengths and strings, and the combinators the value readers are written with.

type parser struct {
	r   *bufio.Reader
	crc uint64
	// valkey is the file's magic: it decides what value types 22 to 25 are.
	valkey bool
	// captured receives every byte read while capturing is set (a value's raw encoding).
	capturing bool
	captured  []byte
	scratch   []byte
}

// readFull reads the next n bytes through the CRC64 and the capture. What it returns is
// valid until the next read: for n up to the buffer's size, it is the buffer itself (no
// copy; the reader calls this for every field of every key), beyond it a scratch slice.
func (p *parser) readFull(n int) ([]byte, error) {
	if n > p.r.Size() {
		return p.readLong(n)
	}
	b, err := p.peek(n)
	if err != nil {
		return nil, err
	}
	_, _ = p.r.Discard(n) // buffered: cannot fail
	p.consumed(b)
	return b, nil
}

// readLong is readFull for more bytes than the buffer holds, into a scratch slice grown
// as the bytes arrive: a corrupt length (up to 1 TiB passes the checks) on a file that
// ends sooner fails at its end, having taken no more memory than the file had.
func (p *parser) readLong(n int) ([]byte, error) {
	b := p.scratch[:0]
	for len(b) < n {
		step := min(n-len(b), p.r.Size())
		chunk, err := p.peek(step)
		if err != nil {
			return nil, err
		}
		if cap(b)-len(b) < step { // doubled, up to n: at most 1.5 n held while it is copied
			b = append(make([]byte, 0, min(n, max(2*cap(b), len(b)+step))), b...)
		}
		b = append(b, chunk...)
		_, _ = p.r.Discard(step)
	}
	p.scratch = b
	p.consumed(b)
	return b, nil
}

// byte is readFull(1) without the slice, with the CRC64's one-byte step.
func (p *parser) byte() (byte, error) {
	v, err := p.r.ReadByte()
	if err != nil {
		return 0, cutShort(err)
	}
	p.crc = jones[0][byte(p.crc)^v] ^ p.crc>>8
	if p.capturing {
		p.captured = append(p.captured, v)
	}
	return v, nil
}

// peek is the next n bytes (n up to the buffer's size), not yet consumed.
func (p *parser) peek(n int) ([]byte, error) {
	b, err := p.r.Peek(n)
	if len(b) < n {
		return nil, cutShort(err)
	}
	return b, nil
}

// consumed passes bytes read through the running CRC64 and, while a value is captured,
// into its capture: every byte the reader takes goes through here (or byte's copy of it).
func (p *parser) consumed(b []byte) {
	p.crc = CRC64(p.crc, b)
	if p.capturing {
		p.captured = append(p.captured, b...)
	}
}

// cutShort is a read error, io.EOF as the file cut short it is mid-field.
func cutShort(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// length reads an RDB length; encoded is true for a special string encoding (then the
// value is the encoding's number).
func (p *parser) length() (n uint64, encoded bool, err error) {
	b, err := p.byte()
	if err != nil {
		return 0, false, err
	}
	switch b >> 6 {
	case 0:
		return uint64(b & 0x3f), false, nil
	case 1:
		b2, err := p.byte()
		if err != nil {
			return 0, false, err
		}
		return uint64(b&0x3f)<<8 | uint64(b2), false, nil
	case 2:
		switch b {
		case 0x80:
			v, err := p.readFull(4)
			if err != nil {
				return 0, false, err
			}
			return uint64(binary.BigEndian.Uint32(v)), false, nil
		case 0x81:
			v, err := p.readFull(8)
			if err != nil {
				return 0, false, err
			}
			return binary.BigEndian.Uint64(v), false, nil
		}
		return 0, false, fmt.Errorf("unknown length encoding 0x%x", b)
	default:
		return uint64(b & 0x3f), true, nil
	}
}

func (p *parser) plainLength() (int, error) {
	n, enc, err := p.length()
	if err != nil {
		return 0, err
	}
	if enc || n > 1<<40 {
		return 0, fmt.Errorf("bad length")
	}
	return int(n), nil
}

// str reads a string; with decode false it only moves past it (its bytes still reach a
// capture) and returns nil.
func (p *parser) str(decode bool) ([]byte, error) {
	if !decode {
		return nil, p.skipStr()
	}
	return p.strInto(nil)
}

func (p *parser) skipStr() error {
	n, enc, err := p.length()
	switch {
	case err != nil:
		return err
	case !enc && n > 1<<40:
		return fmt.Errorf("string length %d too large", n)
	case !enc:
		_, err = p.readFull(int(n))
		return err
	case n <= 2:
		_, err = p.readFull(1 << n)
		return err
	case n == lenEncodedString:
		clen, err := p.plainLength()
		if err == nil {
			_, err = p.plainLength()
		}
		if err == nil {
			_, err = p.readFull(clen)
		}
		return err
	}
	return fmt.Errorf("unknown string encoding %d", n)
}

// strInto reads a string, decoded, into dst's space (dst[:0], grown when short): a key
// read into the same buffer each time costs no allocation.
func (p *parser) strInto(dst []byte) ([]byte, error) {
	n, enc, err := p.length()
	if err != nil {
		return nil, err
	}
	if !enc {
		if n > 1<<40 {
			return nil, fmt.Errorf("string length %d too large", n)
		}
		b, err := p.readFull(int(n))
		if err != nil {
			return nil, err
		}
		return append(dst[:0], b...), nil
	}
	switch n {
	case 0, 1, 2:
		b, err := p.readFull(1 << n)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(dst[:0], intEncoded(b), 10), nil
	case lenEncodedString:
		clen, err := p.plainLength()
		if err != nil {
			return nil, err
		}
		ulen, err := p.plainLength()
		if err != nil {
			return nil, err
		}
		b, err := p.readFull(clen)
		if err != nil {
			return nil, err
		}
		return lzfDecompress(b, ulen, dst)
	}
	return nil, fmt.Errorf("unknown string encoding %d", n)
}

// intEncoded is the integer of an RDB integer-encoded string of 1, 2 or 4 bytes.
func intEncoded(b []byte) int64 {
	switch len(b) {
	case 1:
		return int64(int8(b[0]))
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(b)))
	}
	return int64(int32(binary.LittleEndian.Uint32(b)))
}

func (p *parser) skipStrings(n int) error {
	for i := 0; i < n; i++ {
		if _, err := p.str(false); err != nil {
			return err
		}
	}
	return nil
}

// each reads a length n, then n items with item.
func (p *parser) each(item func() error) error {
	n, err := p.plainLength()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := item(); err != nil {
			return err
		}
	}
	return nil
}

// all runs the readers one after the other, stopping at the first error.
func (p *parser) all(readers ...func() error) error {
	for _, r := range readers {
		if err := r(); err != nil {
			return err
		}
	}
	return nil
}

// skipLength reads a length as large as a uint64 (a field expiry).
func (p *parser) skipLength() error {
	_, err := p.plainLengthAny()
	return err
}

func (p *parser) lengths(n int) error {
	for i := 0; i < n; i++ {
		if _, err := p.plainLengthAny(); err != nil {
			return err
		}
	}
	return nil
}

// plainLengthAny reads a length that may be as large as a uint64 (stream IDs).
func (p *parser) plainLengthAny() (uint64, error) {
	n, enc, err := p.length()
	if err != nil {
		return 0, err
	}
	if enc {
		return 0, errors.New("bad length")
	}
	return n, nil
}

// skipPlainLengths moves past n lengths (plainLength).
func (p *parser) skipPlainLengths(n int) error {
	for i := 0; i < n; i++ {
		if _, err := p.plainLength(); err != nil {
			return err
		}
	}
	return nil
}
