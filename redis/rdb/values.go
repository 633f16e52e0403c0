package rdb

import (
	"errors"
	"fmt"
)

// The value readers: each moves past one value of its type, so its raw encoding reaches
// the capture without being decoded. Listpacks, ziplists, intsets and zipmaps are one
// string each; the older encodings are lists of strings.

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
