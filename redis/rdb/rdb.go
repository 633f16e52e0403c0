// Package rdb reads Redis RDB files (versions up to 11, Redis 7.0 to 7.2) as a stream of
// keys, each with its expiry and its value exactly as the file encodes it, so a restore
// hands every value back to Redis with RESTORE (DumpPayload) without decoding it: every
// type Redis itself saves (strings, lists, sets, sorted sets, hashes, streams, in each of
// their encodings) is carried, including values of any size. Module types are refused.
//
// The file's own CRC64 is checked at its end: a truncated or corrupt file is an error,
// never a shorter list of keys.
package rdb

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Opcodes and value types of rdb.h (Redis 7.2).
const (
	opFunction2      = 245
	opFunctionPreGA  = 246
	opModuleAux      = 247
	opIdle           = 248
	opFreq           = 249
	opAux            = 250
	opResizeDB       = 251
	opExpireTimeMs   = 252
	opExpireTime     = 253
	opSelectDB       = 254
	opEOF            = 255
	typeString       = 0
	typeList         = 1
	typeSet          = 2
	typeZset         = 3
	typeHash         = 4
	typeZset2        = 5
	typeModule       = 6
	typeModule2      = 7
	typeHashZipmap   = 9
	typeListZiplist  = 10
	typeSetIntset    = 11
	typeZsetZiplist  = 12
	typeHashZiplist  = 13
	typeListQuick    = 14
	typeStreamLP     = 15
	typeHashLP       = 16
	typeZsetLP       = 17
	typeListQuick2   = 18
	typeStreamLP2    = 19
	typeSetLP        = 20
	typeStreamLP3    = 21
	maxKnownVersion  = 11
	lenEncodedString = 3
)

// Entry is one key of the file.
type Entry struct {
	// Version is the file's RDB version (what DumpPayload takes).
	Version int
	// DB is the database number (0 in a cluster).
	DB  int
	Key []byte
	// ExpireAtMs is the absolute expiry in Unix milliseconds, 0 for none.
	ExpireAtMs int64
	// Type is the RDB value type; Value its encoding as the file holds it (what DUMP
	// returns before its version and checksum).
	Type  byte
	Value []byte
}

// Header is what the file says about itself before its keys.
type Header struct {
	Version int
	// Aux are the AUX fields (redis-ver, redis-bits, ctime, used-mem, repl-id, ...).
	Aux map[string]string
}

// Scan reads an RDB file from r and calls fn for every key, in file order. The slices of an
// Entry are only valid during the call. It returns the header it read (the AUX fields seen
// before the first key), and an error for a file it cannot read whole: a bad magic, a newer
// version than it knows, a module value, a checksum mismatch, or a file cut short.
func Scan(r io.Reader, fn func(*Entry) error) (*Header, error) {
	p := &parser{r: bufio.NewReaderSize(r, 1<<20), crc: 0}
	return p.scan(fn)
}

type parser struct {
	r   *bufio.Reader
	crc uint64
	// capture, when not nil, receives every byte read (a value's raw encoding).
	capture *[]byte
	scratch []byte
}

func (p *parser) readFull(n int) ([]byte, error) {
	if cap(p.scratch) < n {
		p.scratch = make([]byte, n)
	}
	b := p.scratch[:n]
	if _, err := io.ReadFull(p.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	p.crc = CRC64(p.crc, b)
	if p.capture != nil {
		*p.capture = append(*p.capture, b...)
	}
	return b, nil
}

func (p *parser) byte() (byte, error) {
	b, err := p.readFull(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
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
	n, enc, err := p.length()
	if err != nil {
		return nil, err
	}
	if !enc {
		if n > 1<<40 {
			return nil, fmt.Errorf("string length %d too large", n)
		}
		b, err := p.readFull(int(n))
		if err != nil || !decode {
			return nil, err
		}
		return append([]byte(nil), b...), nil
	}
	switch n {
	case 0, 1, 2:
		size := 1 << n
		b, err := p.readFull(size)
		if err != nil || !decode {
			return nil, err
		}
		var v int64
		switch size {
		case 1:
			v = int64(int8(b[0]))
		case 2:
			v = int64(int16(binary.LittleEndian.Uint16(b)))
		default:
			v = int64(int32(binary.LittleEndian.Uint32(b)))
		}
		return strconv.AppendInt(nil, v, 10), nil
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
		if err != nil || !decode {
			return nil, err
		}
		return lzfDecompress(b, ulen)
	}
	return nil, fmt.Errorf("unknown string encoding %d", n)
}

func (p *parser) skipStrings(n int) error {
	for i := 0; i < n; i++ {
		if _, err := p.str(false); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) scan(fn func(*Entry) error) (*Header, error) {
	magic, err := p.readFull(9)
	if err != nil {
		return nil, fmt.Errorf("failed to read the RDB header: %w", err)
	}
	if string(magic[:5]) != "REDIS" {
		return nil, errors.New("not an RDB file (no REDIS magic)")
	}
	version, err := strconv.Atoi(string(magic[5:]))
	if err != nil {
		return nil, fmt.Errorf("bad RDB version %q", magic[5:])
	}
	if version > maxKnownVersion {
		return nil, fmt.Errorf("RDB version %d is newer than this reader knows (%d)", version, maxKnownVersion)
	}
	h := &Header{Version: version, Aux: map[string]string{}}
	e := &Entry{Version: version}
	var value []byte
	for {
		op, err := p.byte()
		if err != nil {
			return h, fmt.Errorf("RDB cut short: %w", err)
		}
		switch op {
		case opAux:
			k, err := p.str(true)
			if err != nil {
				return h, err
			}
			v, err := p.str(true)
			if err != nil {
				return h, err
			}
			h.Aux[string(k)] = string(v)
			continue
		case opSelectDB:
			db, err := p.plainLength()
			if err != nil {
				return h, err
			}
			e.DB = db
			continue
		case opResizeDB:
			if _, err := p.plainLength(); err != nil {
				return h, err
			}
			if _, err := p.plainLength(); err != nil {
				return h, err
			}
			continue
		case opExpireTimeMs:
			b, err := p.readFull(8)
			if err != nil {
				return h, err
			}
			e.ExpireAtMs = int64(binary.LittleEndian.Uint64(b))
			continue
		case opExpireTime:
			b, err := p.readFull(4)
			if err != nil {
				return h, err
			}
			e.ExpireAtMs = int64(binary.LittleEndian.Uint32(b)) * 1000
			continue
		case opIdle:
			if _, err := p.plainLength(); err != nil {
				return h, err
			}
			continue
		case opFreq:
			if _, err := p.byte(); err != nil {
				return h, err
			}
			continue
		case opFunction2:
			// A function library: not a key; a cluster restore leaves functions out.
			if _, err := p.str(false); err != nil {
				return h, err
			}
			continue
		case opFunctionPreGA, opModuleAux:
			return h, fmt.Errorf("RDB holds module or pre-release function data (opcode %d), which this reader refuses", op)
		case opEOF:
			sum := p.crc
			if version >= 5 {
				b := make([]byte, 8)
				if _, err := io.ReadFull(p.r, b); err != nil {
					return h, fmt.Errorf("RDB cut short before its checksum: %w", err)
				}
				if got := binary.LittleEndian.Uint64(b); got != 0 && got != sum {
					return h, fmt.Errorf("RDB checksum mismatch: file says %016x, content is %016x", got, sum)
				}
			}
			return h, nil
		}
		// A key: op is its value type.
		e.Type = op
		key, err := p.str(true)
		if err != nil {
			return h, fmt.Errorf("failed to read a key: %w", err)
		}
		e.Key = key
		value = value[:0]
		p.capture = &value
		err = p.skipValue(op)
		p.capture = nil
		if err != nil {
			return h, fmt.Errorf("failed to read the value of %q (type %d): %w", key, op, err)
		}
		e.Value = value
		if err := fn(e); err != nil {
			return h, err
		}
		e.ExpireAtMs = 0
	}
}

func (p *parser) skipValue(t byte) error {
	str := func() error { _, err := p.str(false); return err }
	switch t {
	case typeString, typeHashZipmap, typeListZiplist, typeSetIntset, typeZsetZiplist,
		typeHashZiplist, typeHashLP, typeZsetLP, typeSetLP:
		return str()
	case typeList, typeSet, typeListQuick:
		return p.each(str)
	case typeHash:
		return p.each(func() error { return p.all(str, str) })
	case typeZset:
		// A member, then its score as a string of the length the byte gives (253-255 are
		// NaN and the infinities, with no bytes).
		return p.each(func() error { return p.all(str, p.skipOldScore) })
	case typeZset2:
		// A member, then its score as a binary double.
		return p.each(func() error { return p.all(str, func() error { _, err := p.readFull(8); return err }) })
	case typeListQuick2:
		// Each node: its container (plain or packed), then its data.
		return p.each(func() error { return p.all(func() error { _, err := p.plainLength(); return err }, str) })
	case typeStreamLP, typeStreamLP2, typeStreamLP3:
		return p.skipStream(t)
	case typeModule, typeModule2:
		return errors.New("module values are not supported")
	}
	return fmt.Errorf("unknown value type %d", t)
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

// skipOldScore skips a ZSET (type 3) score: a length byte, then that many bytes of a
// decimal string, none for 253-255.
func (p *parser) skipOldScore() error {
	l, err := p.byte()
	if err != nil || l >= 253 {
		return err
	}
	_, err = p.readFull(int(l))
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

func (p *parser) skipStream(t byte) error {
	nodes, err := p.plainLength()
	if err != nil {
		return err
	}
	if err := p.skipStrings(2 * nodes); err != nil { // master ID, listpack
		return err
	}
	// length, last ID (ms, seq); since LISTPACKS_2 first ID, max deleted ID, entries added.
	n := 3
	if t >= typeStreamLP2 {
		n += 5
	}
	if err := p.lengths(n); err != nil {
		return err
	}
	groups, err := p.plainLength()
	if err != nil {
		return err
	}
	for g := 0; g < groups; g++ {
		if _, err := p.str(false); err != nil { // name
			return err
		}
		n := 2 // last delivered ID
		if t >= typeStreamLP2 {
			n++ // entries read
		}
		if err := p.lengths(n); err != nil {
			return err
		}
		pel, err := p.plainLength()
		if err != nil {
			return err
		}
		for i := 0; i < pel; i++ {
			if _, err := p.readFull(16 + 8); err != nil { // raw ID, delivery time
				return err
			}
			if _, err := p.plainLength(); err != nil { // delivery count
				return err
			}
		}
		consumers, err := p.plainLength()
		if err != nil {
			return err
		}
		for c := 0; c < consumers; c++ {
			if _, err := p.str(false); err != nil {
				return err
			}
			times := 8 // seen time
			if t >= typeStreamLP3 {
				times += 8 // active time
			}
			if _, err := p.readFull(times); err != nil {
				return err
			}
			cpel, err := p.plainLength()
			if err != nil {
				return err
			}
			if _, err := p.readFull(16 * cpel); err != nil {
				return err
			}
		}
	}
	return nil
}

// DumpPayload is the value of e as DUMP returns it and RESTORE takes it: the type, the
// value's encoding, the RDB version (2 bytes, little endian) and the CRC64 of all that.
func (e *Entry) DumpPayload(version int) []byte {
	out := make([]byte, 0, 1+len(e.Value)+10)
	out = append(out, e.Type)
	out = append(out, e.Value...)
	out = binary.LittleEndian.AppendUint16(out, uint16(version))
	return binary.LittleEndian.AppendUint64(out, CRC64(0, out))
}

func lzfDecompress(in []byte, outLen int) ([]byte, error) {
	out := make([]byte, 0, outLen)
	i := 0
	for i < len(in) {
		ctrl := int(in[i])
		i++
		if ctrl < 32 {
			n := ctrl + 1
			if i+n > len(in) {
				return nil, errors.New("corrupt LZF literal")
			}
			out = append(out, in[i:i+n]...)
			i += n
			continue
		}
		n := ctrl >> 5
		if n == 7 {
			if i >= len(in) {
				return nil, errors.New("corrupt LZF back reference")
			}
			n += int(in[i])
			i++
		}
		if i >= len(in) {
			return nil, errors.New("corrupt LZF back reference")
		}
		ref := len(out) - ((ctrl & 0x1f) << 8) - int(in[i]) - 1
		i++
		if ref < 0 {
			return nil, errors.New("corrupt LZF back reference")
		}
		for j := 0; j < n+2; j++ {
			out = append(out, out[ref+j])
		}
	}
	if len(out) != outLen {
		return nil, fmt.Errorf("LZF gave %d bytes, want %d", len(out), outLen)
	}
	return out, nil
}
