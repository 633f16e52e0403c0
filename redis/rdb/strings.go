package rdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Strings as the client wrote them: LZF and the integer encodings decoded.

// lzfMaxRatio bounds what LZF gives per byte it reads: a back reference of 3 bytes (the
// control byte, its length byte, its offset) copies 264 bytes at most, a literal run
// gives what it holds.
const lzfMaxRatio = 264 / 3

// lzfDecompress decompresses in, outLen bytes, into dst's space (dst[:0], grown when
// short).
func lzfDecompress(in []byte, outLen int, dst []byte) ([]byte, error) {
	// A longer result than the input can give is a corrupt length, refused before it is
	// allocated.
	if outLen > len(in)*lzfMaxRatio {
		return nil, fmt.Errorf("corrupt LZF string: %d bytes cannot give %d", len(in), outLen)
	}
	out := dst[:0]
	if cap(out) < outLen {
		out = make([]byte, 0, outLen)
	}
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
		out = backReference(out, ref, n+2)
	}
	if len(out) != outLen {
		return nil, fmt.Errorf("LZF gave %d bytes, want %d", len(out), outLen)
	}
	return out, nil
}

// backReference appends the length bytes of out from ref. When they reach past what is
// there (a run of a repeated pattern, its period start-ref), each copy doubles the run
// copied so far: a copy of a whole number of periods continues the pattern.
func backReference(out []byte, ref, length int) []byte {
	start := len(out)
	out = slices.Grow(out, length)[:start+length]
	n := copy(out[start:], out[ref:start])
	for n < length {
		n += copy(out[start+n:], out[start:start+n])
	}
	return out
}

// TypeString is the value type of a string key.
const TypeString = typeString

// StringValue is the value of a string key (Type TypeString) as the client wrote it: the
// RDB string decoded (integer encodings to their decimal text, LZF decompressed).
func (e *Entry) StringValue() ([]byte, error) { return e.StringValueBuf(nil) }

// StringValueBuf is StringValue decoding an integer or LZF-compressed string into buf's
// space (reused when large enough) instead of a new slice: the result may share memory
// with buf or with e.Value.
func (e *Entry) StringValueBuf(buf []byte) ([]byte, error) {
	if e.Type != typeString {
		return nil, fmt.Errorf("value type %d is not a string", e.Type)
	}
	b := e.Value
	if len(b) == 0 {
		return nil, errors.New("empty string encoding")
	}
	n, enc, i, err := lengthAt(b, 0)
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
	return encodedString(b, n, i, buf)
}

// lengthAt reads an RDB length at b[i:] (as parser.length does from the file); encoded
// is true for a special string encoding, next is where what follows starts.
func lengthAt(b []byte, i int) (n uint64, encoded bool, next int, err error) {
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

// encodedString decodes the string b holds in special encoding enc, whose data starts at
// b[i:]: an integer of 1, 2 or 4 bytes, or LZF (compressed and plain lengths, then the
// compressed bytes).
func encodedString(b []byte, enc uint64, i int, dst []byte) ([]byte, error) {
	rest := b[i:]
	switch enc {
	case 0, 1, 2:
		if len(rest) == 1<<enc {
			return strconv.AppendInt(dst[:0], intEncoded(rest), 10), nil
		}
	case lenEncodedString:
		clen, cenc, j, err := lengthAt(b, i)
		if err != nil || cenc {
			return nil, fmt.Errorf("bad LZF length: %v", err)
		}
		ulen, uenc, k, err := lengthAt(b, j)
		if err != nil || uenc || uint64(len(b)-k) != clen || ulen > 1<<40 {
			return nil, fmt.Errorf("bad LZF lengths: %v", err)
		}
		return lzfDecompress(b[k:], int(ulen), dst)
	}
	return nil, fmt.Errorf("bad string encoding %d", enc)
}
