// Package rdb reads RDB files as a stream of keys, each with its expiry and its value
// exactly as the file encodes it, so a restore hands every value back to the server with
// RESTORE (DumpPayload) without decoding it: every type the server itself saves (strings,
// lists, sets, sorted sets, hashes, hashes with field expiries, streams, in each of their
// encodings) is carried, including values of any size. Module types are refused.
//
// The formats read are those of every server the project runs: magic REDIS with versions
// up to 12 (Redis 7.0 writes 10; Redis 7.2 and Valkey 7.2 to 8.1 write 11; Redis 7.4 and
// 8.0 write 12) and magic VALKEY with version 80 (Valkey 9.0 and 9.1). Value types 22 to 25
// mean one thing in Redis' formats (hashes with field expiries, RDB 12) and another in
// Valkey's (22: Valkey 9's hash with field expiries), so the magic decides.
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

// Opcodes and value types of rdb.h (Redis 8.0, Valkey 9.1).
const (
	opSlotImport     = 243 // Valkey 9: slots being imported (atomic slot migration)
	opSlotInfo       = 244 // Redis 7.4+: a slot's key counts, before its keys
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
	lenEncodedString = 3

	// Redis 7.4+ (RDB 12): hashes with field expiries. The PRE_GA ones are 7.4's release
	// candidates'.
	typeHashMetadataPreGA = 22
	typeHashLPExPreGA     = 23
	typeHashMetadata      = 24
	typeHashLPEx          = 25

	// Valkey 9 (RDB 80): a hash with field expiries.
	typeValkeyHash2 = 22

	// MaxRedisVersion is the newest RDB version of magic REDIS this reader knows (Redis
	// 7.4 and 8.0); ValkeyVersion the one of magic VALKEY (Valkey 9.0 and 9.1).
	MaxRedisVersion = 12
	ValkeyVersion   = 80
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
	// Valkey is true for the magic VALKEY (Valkey 9 and later), false for REDIS.
	Valkey bool
	// Aux are the AUX fields before the first key (redis-ver or valkey-ver, redis-bits,
	// ctime, used-mem, repl-id, ...).
	Aux map[string]string
}

// Server is the server and version the file says wrote it: "valkey 9.1.2" (Valkey 8 and
// later write valkey-ver), else "redis 8.0.2" (redis-ver; Valkey 7.2 also writes only
// redis-ver, and is then reported as redis 7.2.x), "" when the file names none.
func (h *Header) Server() string {
	if v := h.Aux["valkey-ver"]; v != "" {
		return "valkey " + v
	}
	if v := h.Aux["redis-ver"]; v != "" {
		return "redis " + v
	}
	return ""
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
	// valkey is the file's magic: it decides what value types 22 to 25 are.
	valkey bool
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
	magic, err := p.readFull(MagicLen)
	if err != nil {
		return nil, fmt.Errorf("failed to read the RDB header: %w", err)
	}
	h, err := ReadMagic(magic)
	if err != nil {
		return nil, err
	}
	version := h.Version
	p.valkey = h.Valkey
	e := &Entry{Version: version}
	var value []byte
	keys := false
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
			if !keys {
				h.Aux[string(k)] = string(v) // Valkey 9 writes a slot-info one before each slot's keys
			}
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
		case opSlotInfo:
			// The slot, its keys and its keys with an expiry: a sizing hint.
			if err := p.lengths(3); err != nil {
				return h, err
			}
			continue
		case opSlotImport:
			return h, errors.New("RDB holds slots being imported (Valkey atomic slot migration, opcode 243): a cut is taken with every slot stable")
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
		keys = true
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

// MagicLen is the length of the magic an RDB file starts with (ReadMagic).
const MagicLen = 9

// ReadMagic reads the 9 bytes a file starts with: REDIS and 4 digits, or VALKEY and 3,
// and returns the Header they make (no AUX fields), or why the reader refuses the file.
func ReadMagic(magic []byte) (*Header, error) {
	if len(magic) != MagicLen {
		return nil, fmt.Errorf("an RDB magic has %d bytes, not %d", MagicLen, len(magic))
	}
	var h Header
	var digits []byte
	switch {
	case string(magic[:5]) == "REDIS":
		digits = magic[5:]
	case string(magic[:6]) == "VALKEY":
		h.Valkey, digits = true, magic[6:]
	default:
		return nil, fmt.Errorf("not an RDB file (magic %q)", magic)
	}
	v, err := strconv.Atoi(string(digits))
	if err != nil || v < 1 {
		return nil, fmt.Errorf("bad RDB version %q", digits)
	}
	h.Version = v
	switch {
	case !h.Valkey && v > MaxRedisVersion:
		return nil, fmt.Errorf("RDB version %d (magic REDIS) is newer than this reader knows (%d)", v, MaxRedisVersion)
	case h.Valkey && v != ValkeyVersion:
		return nil, fmt.Errorf("RDB version %d (magic VALKEY) is not one this reader knows (%d)", v, ValkeyVersion)
	}
	h.Aux = map[string]string{}
	return &h, nil
}

func (p *parser) skipValue(t byte) error {
	str := func() error { _, err := p.str(false); return err }
	ms := func() error { _, err := p.readFull(8); return err }
	if p.valkey && t == typeValkeyHash2 {
		// Each field: its name, its value, its expiry (ms, -1 for none).
		return p.each(func() error { return p.all(str, str, ms) })
	}
	if !p.valkey {
		switch t {
		case typeHashMetadata:
			// The hash's earliest field expiry (ms), then each field: its expiry (a length,
			// 0 for none, else relative to the earliest plus one), name and value.
			return p.all(ms, func() error { return p.each(func() error { return p.all(p.skipLength, str, str) }) })
		case typeHashMetadataPreGA:
			// As above with no earliest expiry, each field's expiry absolute.
			return p.each(func() error { return p.all(p.skipLength, str, str) })
		case typeHashLPEx:
			// The earliest field expiry (ms), then a listpack of (field, value, expiry).
			return p.all(ms, str)
		case typeHashLPExPreGA:
			return str()
		}
	}
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
		return p.each(func() error { return p.all(str, ms) })
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

// TypeString is the value type of a string key.
const TypeString = typeString

// StringValue is the value of a string key (Type TypeString) as the client wrote it: the
// RDB string decoded (integer encodings to their decimal text, LZF decompressed).
func (e *Entry) StringValue() ([]byte, error) {
	if e.Type != typeString {
		return nil, fmt.Errorf("value type %d is not a string", e.Type)
	}
	b := e.Value
	if len(b) == 0 {
		return nil, errors.New("empty string encoding")
	}
	// length reads an RDB length at b[i:]; encoded for a special encoding.
	length := func(i int) (n uint64, encoded bool, next int, err error) {
		if i >= len(b) {
			return 0, false, 0, io.ErrUnexpectedEOF
		}
		switch b[i] >> 6 {
		case 0:
			return uint64(b[i] & 0x3f), false, i + 1, nil
		case 1:
			if i+1 >= len(b) {
				return 0, false, 0, io.ErrUnexpectedEOF
			}
			return uint64(b[i]&0x3f)<<8 | uint64(b[i+1]), false, i + 2, nil
		case 2:
			switch {
			case b[i] == 0x80 && i+5 <= len(b):
				return uint64(binary.BigEndian.Uint32(b[i+1:])), false, i + 5, nil
			case b[i] == 0x81 && i+9 <= len(b):
				return binary.BigEndian.Uint64(b[i+1:]), false, i + 9, nil
			}
			return 0, false, 0, fmt.Errorf("bad length encoding 0x%x", b[i])
		}
		return uint64(b[i] & 0x3f), true, i + 1, nil
	}
	n, enc, i, err := length(0)
	if err != nil {
		return nil, err
	}
	rest := b[i:]
	if !enc {
		if uint64(len(rest)) != n {
			return nil, fmt.Errorf("string of %d bytes in %d", n, len(rest))
		}
		return rest, nil
	}
	switch n {
	case 0:
		if len(rest) == 1 {
			return strconv.AppendInt(nil, int64(int8(rest[0])), 10), nil
		}
	case 1:
		if len(rest) == 2 {
			return strconv.AppendInt(nil, int64(int16(binary.LittleEndian.Uint16(rest))), 10), nil
		}
	case 2:
		if len(rest) == 4 {
			return strconv.AppendInt(nil, int64(int32(binary.LittleEndian.Uint32(rest))), 10), nil
		}
	case lenEncodedString:
		clen, cenc, j, err := length(i)
		if err != nil || cenc {
			return nil, fmt.Errorf("bad LZF length: %v", err)
		}
		ulen, uenc, k, err := length(j)
		if err != nil || uenc || uint64(len(b)-k) != clen || ulen > 1<<40 {
			return nil, fmt.Errorf("bad LZF lengths: %v", err)
		}
		return lzfDecompress(b[k:], int(ulen))
	}
	return nil, fmt.Errorf("bad string encoding %d", n)
}
