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

// DumpPayload is the value of e as DUMP returns it and RESTORE takes it: the type, the
// value's encoding, the RDB version (2 bytes, little endian) and the CRC64 of all that.
func (e *Entry) DumpPayload(version int) []byte {
	out := make([]byte, 0, 1+len(e.Value)+10)
	out = append(out, e.Type)
	out = append(out, e.Value...)
	out = binary.LittleEndian.AppendUint16(out, uint16(version))
	return binary.LittleEndian.AppendUint64(out, CRC64(0, out))
}
