package rdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The scanner: the file's opcodes in order, each key handed to the caller with its
// expiry and its value's raw encoding, the checksum checked at the end.

func (p *parser) scan(fn func(*Entry) error) (*Header, error) {
	magic, err := p.readFull(MagicLen)
	if err != nil {
		return nil, fmt.Errorf("failed to read the RDB header: %w", err)
	}
	h, err := ReadMagic(magic)
	if err != nil {
		return nil, err
	}
	p.valkey = h.Valkey
	e := &Entry{Version: h.Version}
	var value []byte
	keys := false
	for {
		op, err := p.byte()
		if err != nil {
			return h, fmt.Errorf("RDB cut short: %w", err)
		}
		if op == opEOF {
			return h, p.checksum(h.Version)
		}
		if handled, err := p.opcode(op, h, e, keys); handled || err != nil {
			if err != nil {
				return h, err
			}
			continue
		}
		// A key: op is its value type.
		keys = true
		if value, err = p.readKey(op, e, value); err != nil {
			return h, err
		}
		if err := fn(e); err != nil {
			return h, err
		}
		e.ExpireAtMs = 0
	}
}

// opcode reads what follows an opcode that is no value type into h (AUX fields before
// the first key, keys true once one was read) or e (database, expiry), or moves past it;
// handled is false when op is a value type, a key.
func (p *parser) opcode(op byte, h *Header, e *Entry, keys bool) (handled bool, err error) {
	switch op {
	case opAux:
		return true, p.aux(h, keys)
	case opSelectDB:
		e.DB, err = p.plainLength()
		return true, err
	case opResizeDB:
		return true, p.skipPlainLengths(2)
	case opExpireTimeMs, opExpireTime:
		return true, p.expiry(op, e)
	case opIdle:
		return true, p.skipPlainLengths(1)
	case opFreq:
		_, err := p.byte()
		return true, err
	case opFunction2:
		// A function library: not a key; a cluster restore leaves functions out.
		_, err := p.str(false)
		return true, err
	case opSlotInfo:
		// The slot, its keys and its keys with an expiry: a sizing hint.
		return true, p.lengths(3)
	case opSlotImport:
		return true, errors.New("RDB holds slots being imported (Valkey atomic slot migration, opcode 243): a cut is taken with every slot stable")
	case opFunctionPreGA, opModuleAux:
		return true, fmt.Errorf("RDB holds module or pre-release function data (opcode %d), which this reader refuses", op)
	}
	return false, nil
}

// aux reads an AUX field, kept in h only before the first key: Valkey 9 writes a
// slot-info one before each slot's keys.
func (p *parser) aux(h *Header, keys bool) error {
	k, err := p.str(true)
	if err != nil {
		return err
	}
	v, err := p.str(true)
	if err != nil {
		return err
	}
	if !keys {
		h.Aux[string(k)] = string(v)
	}
	return nil
}

// expiry reads the next key's expiry, in milliseconds (opExpireTimeMs) or seconds.
func (p *parser) expiry(op byte, e *Entry) error {
	if op == opExpireTimeMs {
		b, err := p.readFull(8)
		if err != nil {
			return err
		}
		e.ExpireAtMs = int64(binary.LittleEndian.Uint64(b))
		return nil
	}
	b, err := p.readFull(4)
	if err != nil {
		return err
	}
	e.ExpireAtMs = int64(binary.LittleEndian.Uint32(b)) * 1000
	return nil
}

// readKey reads a key of value type t into e, its value's raw encoding captured into
// buf (reused from key to key), and returns buf.
func (p *parser) readKey(t byte, e *Entry, buf []byte) ([]byte, error) {
	e.Type = t
	// The key is read into the previous key's space: an Entry's slices are only valid
	// during the callback.
	key, err := p.strInto(e.Key)
	if err != nil {
		return buf, fmt.Errorf("failed to read a key: %w", err)
	}
	e.Key = key
	buf = buf[:0]
	p.captured, p.capturing = buf, true
	err = p.skipValue(t)
	buf, p.captured, p.capturing = p.captured, nil, false
	if err != nil {
		return buf, fmt.Errorf("failed to read the value of %q (type %d): %w", key, t, err)
	}
	e.Value = buf
	return buf, nil
}

// checksum reads the CRC64 after the EOF opcode (RDB 5 and later) and compares it with
// the content's; a file that says 0 was written with the checksum off.
func (p *parser) checksum(version int) error {
	if version < 5 {
		return nil
	}
	sum := p.crc
	b := make([]byte, 8)
	if _, err := io.ReadFull(p.r, b); err != nil {
		return fmt.Errorf("RDB cut short before its checksum: %w", err)
	}
	if got := binary.LittleEndian.Uint64(b); got != 0 && got != sum {
		return fmt.Errorf("RDB checksum mismatch: file says %016x, content is %016x", got, sum)
	}
	return nil
}
